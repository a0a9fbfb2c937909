/**
 * Group concurrency in the dispatcher: how many messages of each group are held (records locked, as the
 * mirror places them, so a new dispatcher counts them again from the deliveries it reads at takeover) or
 * being delivered (Txns in flight). A ready message whose group is full is parked, out of the ready index,
 * so the heads of the ready queues stay takeable and other groups keep flowing; it is filed again once its
 * group has room (a held message finished or lost its lock) or the limit changed.
 */
import type { Consumer, Msg } from './model.js';

const NONE: readonly Msg[] = [];

/**
 * Which consumers a group's message goes to: one claiming now (an ask not answered yet), one that gave room
 * back since its last answer (it finished a message), or one whose last claim got nothing (an idle worker, which
 * the delivery wakes). Not one that got messages and has room left but is not asking: a freed slot or a raised
 * limit is for whoever claims next.
 */
export class Appetite {
  private readonly state = new WeakMap<Consumer, { ask: number; given: number; hungry: boolean }>();

  given(c: Consumer): void {
    const s = this.of(c);
    s.given += 1;
    s.hungry = false;
  }

  answered(c: Consumer): void {
    const s = this.of(c);
    s.hungry = s.given === 0;
  }

  /** Also one that gave room back since its last answer: a worker claims again then without asking. */
  wants(c: Consumer): boolean {
    return c.reg.ask > c.answered || c.owed || this.of(c).hungry;
  }

  private of(c: Consumer): { ask: number; given: number; hungry: boolean } {
    let s = this.state.get(c);
    if (s?.ask !== c.reg.ask) {
      s = { ask: c.reg.ask, given: 0, hungry: false };
      this.state.set(c, s);
    }
    return s;
  }
}

export class GroupGate {
  private readonly heldBy = new Map<Msg, string>();
  private readonly counts = new Map<string, number>();
  private readonly parked = new Map<string, Set<Msg>>();
  /** Groups whose count went down since the last unpark; null: every group (the limit changed). */
  private freed: Set<string> | null = new Set();

  /** The mirror placed a locked message. */
  hold(msg: Msg, group: string | null): void {
    if (group === null || this.heldBy.has(msg)) return;
    this.heldBy.set(msg, group);
    this.add(group, 1);
  }

  /** The mirror unplaced a message (it may not have been held). */
  unhold(msg: Msg): void {
    const group = this.heldBy.get(msg);
    if (group === undefined) return;
    this.heldBy.delete(msg);
    this.add(group, -1);
  }

  /** A delivery of a message of this group is in flight; call the returned function once it has answered. */
  reserve(group: string): () => void {
    this.add(group, 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.add(group, -1);
    };
  }

  full(group: string | null, limit: number | null): boolean {
    return group !== null && limit !== null && (this.counts.get(group) ?? 0) >= limit;
  }

  park(msg: Msg, group: string): void {
    let set = this.parked.get(group);
    if (set === undefined) {
      set = new Set();
      this.parked.set(group, set);
    }
    set.add(msg);
  }

  /** A group's parked messages are looked at again (its rate limit's slot came). */
  free(group: string): void {
    this.freed?.add(group);
  }

  /** The limit changed, or a consumer asks: every parked message is looked at again. */
  limitChanged(): void {
    this.freed = null;
  }

  /**
   * Parked messages of groups that have room now (as many as fit), taken out; `valid` skips stale ones. `limit`
   * is groupConcurrency, or what room a group with `held` messages has.
   */
  unpark(
    limit: number | null | ((group: string, held: number) => number),
    valid: (msg: Msg) => boolean,
  ): readonly Msg[] {
    // Nothing parked (no groups, or none full): nothing to look at; planned before every delivery round.
    if (this.parked.size === 0) {
      if (this.freed === null) this.freed = new Set();
      else this.freed.clear();
      return NONE;
    }
    const groups = this.freed === null ? [...this.parked.keys()] : [...this.freed];
    this.freed = new Set();
    const out: Msg[] = [];
    for (const group of groups) {
      const set = this.parked.get(group);
      if (set === undefined) continue;
      const held = this.counts.get(group) ?? 0;
      let room = limit === null ? Infinity : typeof limit === 'number' ? limit - held : limit(group, held);
      // Oldest first (ordered-key order): parking again may have moved a message to the end of the set.
      const waiting = [...set].sort((a, b) => (a.orderedKey < b.orderedKey ? -1 : a.orderedKey > b.orderedKey ? 1 : 0));
      for (const msg of waiting) {
        if (room <= 0) break;
        set.delete(msg);
        if (!valid(msg)) continue;
        out.push(msg);
        room -= 1;
      }
      if (set.size === 0) this.parked.delete(group);
    }
    return out;
  }

  /** Forgets everything (the mirror is read afresh). */
  clear(): void {
    this.heldBy.clear();
    this.counts.clear();
    this.parked.clear();
    this.freed = new Set();
  }

  private add(group: string, delta: number): void {
    const next = (this.counts.get(group) ?? 0) + delta;
    if (next <= 0) this.counts.delete(group);
    else this.counts.set(group, next);
    if (delta < 0) this.freed?.add(group);
  }
}
