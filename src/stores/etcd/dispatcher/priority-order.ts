/**
 * Deliveries in priority order across Txns that may commit in any order: a delivery of a priority above 0
 * carries a guard (no ordered key of a higher priority unseen by the mirror), and while a delivery is in flight
 * none of a lower priority is planned. A guard that fails holds guarded deliveries until the mirror has seen the
 * key that failed it.
 */
import { priorityGuard, unseenRevision, type PriorityGuard } from './priority-guard.js';
import type * as changes from './changes.js';
import type { QueueKeys } from '../keys.js';
import type { Msg } from './model.js';
import type { Planned } from './types.js';

// A hold on guarded deliveries ends after this long even if the watch never showed the key (then plans try again).
const PRIORITY_HOLD_MAX_MS = 1000;

export class PriorityOrder {
  /**
   * A priority guard failed on an ordered key created at this revision: deliveries of priorities above 0
   * wait until the mirror has seen it (or `PRIORITY_HOLD_MAX_MS` passed since `heldAt`).
   */
  private holdUntilSeen = 0;
  private heldAt = 0;
  /** The last guard made per priority: deliveries planned from the same revision share it (one compare per Txn). */
  private readonly guards = new Map<number, { seen: number; guard: PriorityGuard }>();
  /** Deliveries of ready messages in Txns in flight, by priority: none of a lower priority goes meanwhile. */
  private readonly flying = new Map<number, number>();

  constructor(
    private readonly keys: QueueKeys,
    /** The revision up to which the mirror has seen every ordered key (events.ts). */
    private readonly seenRevision: () => number,
  ) {}

  /** True while guarded deliveries wait for the mirror to see a key that failed one. */
  held(now: number): boolean {
    if (this.holdUntilSeen === 0) return false;
    if (this.seenRevision() >= this.holdUntilSeen || now - this.heldAt > PRIORITY_HOLD_MAX_MS) {
      this.holdUntilSeen = 0;
      return false;
    }
    return true;
  }

  /** When a hold ends at the latest (Infinity: none), to plan again then. */
  get holdEndsAt(): number {
    return this.holdUntilSeen === 0 ? Infinity : this.heldAt + PRIORITY_HOLD_MAX_MS + 1;
  }

  /** The highest priority (lowest number) of the deliveries in flight; Infinity when none is. */
  flyingCeiling(): number {
    let ceiling = Infinity;
    for (const priority of this.flying.keys()) ceiling = Math.min(ceiling, priority);
    return ceiling;
  }

  /**
   * A delivery of a ready message counts in `flying` until its Txn answered: a delivery of a lower priority
   * planned meanwhile could commit first (another Txn), or stay while this one fails and goes again.
   */
  private counted(priority: number, change: Planned): Planned {
    this.flying.set(priority, (this.flying.get(priority) ?? 0) + 1);
    const land = (): void => this.land(priority);
    return firstTold(change, { ok: land, fail: land, error: land });
  }

  /** A delivery counted in `flying` answered. */
  private land(priority: number): void {
    const left = (this.flying.get(priority) ?? 1) - 1;
    if (left > 0) this.flying.set(priority, left);
    else this.flying.delete(priority);
  }

  /**
   * A delivery of a priority above 0 carries the priority guard (its read last); a failure on the guard holds
   * such deliveries until the mirror has seen the key that failed it.
   */
  guarded(msg: Msg, ops: changes.Ops, wrap: (ops: changes.Ops) => Planned): Planned {
    const seen = this.seenRevision();
    const priority = msg.record.priority;
    let guard = this.guards.get(priority)?.seen === seen ? (this.guards.get(priority)?.guard ?? null) : null;
    if (guard === null) {
      guard = priorityGuard(this.keys, priority, seen);
      if (guard !== null) this.guards.set(priority, { seen, guard });
    }
    if (guard === null) return this.counted(priority, wrap(ops));
    ops.compares.push(guard.compare);
    ops.reads.push(guard.read);
    const change = this.counted(priority, wrap(ops));
    return {
      ...change,
      onFail: (reads) => {
        const unseen = unseenRevision(reads.at(-1), seen);
        if (unseen > 0)
          if (unseen > this.holdUntilSeen) {
            this.holdUntilSeen = unseen;
            this.heldAt = Date.now();
          }
        change.onFail(reads);
      },
    };
  }
}

/** The change, with `first` told of its Txn's answer before the change itself. */
export function firstTold(
  change: Planned,
  first: { ok(revision: number): void; fail(): void; error(): void },
): Planned {
  return {
    ...change,
    onOk: (revision) => {
      first.ok(revision);
      change.onOk(revision);
    },
    onFail: (reads) => {
      first.fail();
      change.onFail(reads);
    },
    onError: () => {
      first.error();
      change.onError();
    },
  };
}
