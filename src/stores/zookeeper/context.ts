/**
 * What every operation of one store shares: the session, wake-ups, the queues
 * it has touched, and the claims this process holds. A held claim remembers
 * the state node's version it wrote and the session it was made in: a finish
 * or extend writes with that version (so a takeover or clear makes it fail),
 * and a claim from an earlier session is lost without asking the server.
 */
import { ClaimCache } from './claim-cache.js';
import type { ZkSession } from './client.js';
import type { TaskState } from './layout.js';
import { QueueContext } from './queue.js';
import type { Wakeups } from './wakeups.js';

export interface Held {
  readonly queue: string;
  readonly consumer: string;
  readonly id: string;
  readonly attempt: number;
  readonly epoch: number;
  readonly taskPath: string;
  /** The queue entry, kept while the message is locked. */
  readonly entryPath: string;
  stateVersion: number;
  state: TaskState;
}

export class StoreContext {
  private readonly queues = new Map<string, QueueContext>();
  private readonly held = new Map<string, Held>();
  /** Consumers registered through this store, with the session epoch their `current` node belongs to. */
  readonly registered = new Map<string, { epoch: number; host: string; pid: number }>();
  /** What claims remember between calls: entries held, reads sent ahead. */
  readonly claims = new ClaimCache();

  constructor(
    readonly zk: ZkSession,
    readonly wakeups: Wakeups,
  ) {
    // The old session's watches and claims are gone with it: every view is read again.
    zk.onNewSession(() => {
      this.claims.clear();
      for (const q of this.queues.values()) q.invalidate();
    });
  }

  queue(name: string): QueueContext {
    let q = this.queues.get(name);
    if (q === undefined) {
      q = new QueueContext(this.zk, name, () => this.wakeups.notify(name));
      this.queues.set(name, q);
    }
    return q;
  }

  getHeld(queue: string, consumer: string, id: string): Held | undefined {
    const held = this.held.get(key(queue, consumer, id));
    // A claim made in a session that has since expired is gone with its ephemeral node.
    if (held !== undefined && held.epoch !== this.zk.epoch) {
      this.held.delete(key(queue, consumer, id));
      return undefined;
    }
    return held;
  }

  setHeld(held: Held): void {
    this.held.set(key(held.queue, held.consumer, held.id), held);
  }

  /**
   * Forgets the claim of `attempt`, and only of that one: what ended an earlier attempt (its finish, a late
   * renewal's answer) must not forget the next attempt of the same message, claimed meanwhile.
   */
  dropHeld(queue: string, consumer: string, id: string, attempt: number): void {
    const k = key(queue, consumer, id);
    if (this.held.get(k)?.attempt === attempt) this.held.delete(k);
  }

  /** Ids `consumer` holds on `queue` now, as its `current` node shows them. */
  holding(queue: string, consumer: string): string[] {
    const ids: string[] = [];
    for (const held of this.held.values()) {
      if (held.queue === queue && held.consumer === consumer && held.epoch === this.zk.epoch) ids.push(held.id);
    }
    return ids;
  }

  /** The consumer's `current` node, when it is registered in this session. */
  currentPath(queue: string, consumer: string): string | null {
    const registration = this.registered.get(registrationKey(queue, consumer));
    if (registration?.epoch !== this.zk.epoch) return null;
    return this.queue(queue).paths.current(consumer);
  }

  currentData(queue: string, consumer: string, extra: readonly string[] = [], without: readonly string[] = []): Buffer {
    const ids = new Set(this.holding(queue, consumer));
    for (const id of extra) ids.add(id);
    for (const id of without) ids.delete(id);
    return Buffer.from(JSON.stringify({ holding: [...ids], lastSeenAt: Date.now() }));
  }
}

function key(queue: string, consumer: string, id: string): string {
  return `${queue}\u0000${consumer}\u0000${id}`;
}

export function registrationKey(queue: string, consumer: string): string {
  return `${queue}\u0000${consumer}`;
}
