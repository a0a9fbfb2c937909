/**
 * Subscriptions to queue events: one child watch on `<queue>/events` per
 * process and queue, however many listeners, set again each time it fires
 * (each re-arm lists the node's children: at most MAX_KEPT names, see
 * events.ts), and listeners are called once it is set again, so a write
 * between the firing and the new watch is not missed. A watch that could not
 * be set is tried again shortly, with a spurious call meanwhile; a new session
 * (the old one's watches are gone) calls every listener. After close nothing
 * is called.
 */
import { isZkError, ZkCode, type ZkSession } from './client.js';
import { QueueListeners } from '../contract/queue-listeners.js';

/** A watch that failed to be set (connection trouble) is tried again after this long. */
const RETRY_MS = 1000;

export class EventWatches {
  private readonly listeners = new QueueListeners();
  private readonly armed = new Set<string>();
  private readonly retries = new Set<NodeJS.Timeout>();
  private closed = false;

  constructor(
    private readonly zk: ZkSession,
    private readonly pathOf: (queue: string) => string,
  ) {
    zk.onNewSession(() => {
      this.armed.clear();
      for (const queue of this.listeners.queues()) {
        this.arm(queue);
        this.notify(queue);
      }
    });
  }

  subscribe(queue: string, listener: () => void): () => void {
    const remove = this.listeners.add(queue, listener);
    this.arm(queue);
    return remove;
  }

  close(): void {
    this.closed = true;
    this.listeners.clear();
    for (const timer of this.retries) clearTimeout(timer);
    this.retries.clear();
  }

  private notify(queue: string): void {
    if (!this.closed) this.listeners.notify(queue);
  }

  /**
   * Sets the watch unless one is set, then calls the listeners: what was
   * written before the watch was set is theirs to read, what comes after
   * fires it. A queue not made yet is watched for its `events` node to appear.
   */
  private arm(queue: string): void {
    if (this.closed || this.armed.has(queue) || !this.listeners.has(queue)) return;
    this.armed.add(queue);
    const path = this.pathOf(queue);
    // Once: the exists watch of a queue not made yet may fire after a read already did.
    let fired = false;
    const fire = (): void => {
      if (fired) return;
      fired = true;
      this.armed.delete(queue);
      this.arm(queue);
    };
    this.zk
      .children(path, fire)
      .catch(async (error: unknown) => {
        if (!isZkError(error, ZkCode.NoNode)) throw error;
        if ((await this.zk.exists(path, fire)) !== null) fire();
      })
      .then(
        () => this.notify(queue),
        () => {
          // Not set: listeners look now (something may have been written), and the watch is tried again.
          this.armed.delete(queue);
          this.notify(queue);
          const timer = setTimeout(() => {
            this.retries.delete(timer);
            this.arm(queue);
          }, RETRY_MS);
          timer.unref();
          this.retries.add(timer);
        },
      );
  }
}
