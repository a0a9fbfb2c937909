/**
 * How a holder hears of a cancel: a cancel of a held message creates a note under the holder's consumer node in
 * its multi (cancel-notes.ts), and the process of each consumer registered through this store keeps a child
 * watch on that node, set at registration and again each time it fires (one listing of a few names). A note
 * heard is told to the queue's listeners with its id and attempt, then removed. A new session lists every
 * watched consumer again; a watch that could not be set is tried again shortly. Nothing per message is read
 * or written for this: a claim costs what it did.
 */
import { isZkError, ZkCode, type ZkSession } from './client.js';
import { parseCancelNote } from './cancel-notes.js';
import { QueueListeners } from '../contract/queue-listeners.js';
import type { QueuePaths } from './layout.js';
import type { CanceledMessage } from '../contract/contract.js';

type Listener = (canceled: CanceledMessage | null) => void;

/** A watch that failed to be set (connection trouble) is tried again after this long. */
const RETRY_MS = 1000;

interface Watched {
  readonly queue: string;
  readonly consumer: string;
  /** The session epoch its watch is set in, or null while none is. */
  armed: number | null;
}

export class CancelWatches {
  private readonly listeners = new QueueListeners<CanceledMessage | null>();
  private readonly watched = new Map<string, Watched>();
  /** Notes told and being removed: a listing before their removal does not tell them again. */
  private readonly removing = new Set<string>();
  private readonly retries = new Set<NodeJS.Timeout>();
  private closed = false;

  constructor(
    private readonly zk: ZkSession,
    private readonly pathsOf: (queue: string) => QueuePaths,
    /** Before the listeners: the store lets go of its claim, so a handoff of it is never delivered. */
    private readonly onHeard: (queue: string, consumer: string, canceled: CanceledMessage) => void,
  ) {
    zk.onNewSession(() => {
      for (const w of this.watched.values()) {
        w.armed = null;
        this.arm(w);
      }
    });
  }

  subscribe(queue: string, listener: Listener): () => void {
    return this.listeners.add(queue, listener);
  }

  /** Watches a consumer registered through this store (again at each registration: a no-op while set). */
  watch(queue: string, consumer: string): void {
    const key = `${queue}\u0000${consumer}`;
    let w = this.watched.get(key);
    if (w === undefined) {
      w = { queue, consumer, armed: null };
      this.watched.set(key, w);
    }
    this.arm(w);
  }

  /** An unregistered consumer: its watch, should it fire, is not set again. */
  unwatch(queue: string, consumer: string): void {
    this.watched.delete(`${queue}\u0000${consumer}`);
  }

  close(): void {
    this.closed = true;
    this.listeners.clear();
    this.watched.clear();
    for (const timer of this.retries) clearTimeout(timer);
    this.retries.clear();
  }

  private arm(w: Watched): void {
    if (this.closed || w.armed === this.zk.epoch || this.watched.get(`${w.queue}\u0000${w.consumer}`) !== w) return;
    const epoch = this.zk.epoch;
    w.armed = epoch;
    const path = this.pathsOf(w.queue).consumer(w.consumer);
    let fired = false;
    const fire = (): void => {
      if (fired) return;
      fired = true;
      if (w.armed === epoch) w.armed = null;
      this.arm(w);
    };
    this.zk.children(path, fire).then(
      ({ children }) => this.heard(w, path, children),
      (error: unknown) => {
        if (w.armed === epoch) w.armed = null;
        // Gone (unregistered, or taken by GC): the next registration makes it and watches it again.
        if (isZkError(error, ZkCode.NoNode)) return;
        const timer = setTimeout(() => {
          this.retries.delete(timer);
          this.arm(w);
        }, RETRY_MS);
        timer.unref();
        this.retries.add(timer);
      },
    );
  }

  private heard(w: Watched, parent: string, children: readonly string[]): void {
    for (const child of children) {
      const canceled = parseCancelNote(child);
      const path = `${parent}/${child}`;
      if (canceled === null || this.removing.has(path)) continue;
      this.removing.add(path);
      if (!this.closed) {
        this.onHeard(w.queue, w.consumer, canceled);
        this.listeners.notify(w.queue, canceled);
      }
      this.zk
        .remove(path, -1)
        .catch(() => undefined)
        .finally(() => this.removing.delete(path));
    }
  }
}
