/**
 * Wake-ups for idle workers, once per process and queue however many workers
 * and slots subscribe. The watches themselves are those that keep each
 * queue's view for claims (queue.ts, buckets.ts): a data watch on each
 * sub-queue a consumer of this process takes from (producers touch it in the
 * multi that adds an entry) and a child watch on `/queue` (a new sub-queue).
 * Each is set once and fires once per change until the next claim sets it
 * again, so a put costs a process at most one notification. Watches on other
 * consumers' claims tell when a dead session frees a message.
 */
import type { ZkSession } from './client.js';
import { QueueListeners } from '../contract/queue-listeners.js';

export class Wakeups {
  private readonly listeners = new QueueListeners();
  /** Paths with a watch set now, per queue. */
  private readonly armed = new Map<string, Set<string>>();

  constructor(private readonly zk: ZkSession) {
    // A new session has none of the old watches: everyone looks again.
    zk.onNewSession(() => {
      this.armed.clear();
      for (const queue of this.listeners.queues()) this.notify(queue);
    });
  }

  subscribe(queue: string, listener: () => void): () => void {
    return this.listeners.add(queue, listener);
  }

  /** Tells this process's subscribers of `queue` that messages may be ready. */
  notify(queue: string): void {
    this.listeners.notify(queue);
  }

  hasListeners(queue: string): boolean {
    return this.listeners.has(queue);
  }

  /** Exists watch on another consumer's claim: its deletion frees the message. */
  async armClaim(queue: string, path: string, onGone: () => void): Promise<void> {
    const fire = this.arm(queue, path, onGone);
    if (fire === null) return;
    try {
      if ((await this.zk.exists(path, fire)) === null) fire();
    } catch {
      this.disarm(queue, path);
    }
  }

  private arm(queue: string, key: string, before?: () => void): (() => void) | null {
    let set = this.armed.get(queue);
    if (set === undefined) {
      set = new Set();
      this.armed.set(queue, set);
    }
    if (set.has(key)) return null;
    set.add(key);
    const armed = set;
    return () => {
      if (!armed.delete(key)) return;
      before?.();
      this.notify(queue);
    };
  }

  private disarm(queue: string, key: string): void {
    this.armed.get(queue)?.delete(key);
  }
}
