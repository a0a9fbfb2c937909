/**
 * Wake-ups for idle workers. Within a process, a write to a queue wakes that
 * queue's subscribers directly. Across processes sharing the file, a change
 * to the write-ahead log (inotify through fs.watch) that another connection
 * made wakes every subscriber of this store; a wake-up is only a hint to
 * claim again, so a spurious one is cheap and a missed one is impossible.
 */
import { EventEmitter } from 'node:events';
import { watch, type FSWatcher } from 'node:fs';

// Every store instance on the same file in this process shares one hub.
const hubs = new Map<string, { emitter: EventEmitter; users: number }>();

export class Wakeups {
  private readonly hub: EventEmitter;
  private readonly listeners = new Map<string, Set<() => void>>();
  private watcher: FSWatcher | null = null;
  private pending = false;

  /**
   * @param changedElsewhere true when another connection committed since the
   *   last call (SQLite's data_version), so this process's own commits, which
   *   already woke its subscribers, do not wake them again.
   */
  constructor(
    private readonly file: string,
    private readonly walFile: string,
    private readonly changedElsewhere: () => boolean,
  ) {
    let hub = hubs.get(file);
    if (hub === undefined) {
      hub = { emitter: new EventEmitter(), users: 0 };
      hub.emitter.setMaxListeners(0);
      hubs.set(file, hub);
    }
    hub.users += 1;
    this.hub = hub.emitter;
  }

  /** Tells this process's subscribers of `queue` that messages may be ready. */
  notify(queue: string): void {
    this.hub.emit(queue);
  }

  subscribe(queue: string, listener: () => void): () => void {
    let set = this.listeners.get(queue);
    if (set === undefined) {
      set = new Set();
      this.listeners.set(queue, set);
    }
    set.add(listener);
    this.hub.on(queue, listener);
    this.watchWal();
    return () => {
      set.delete(listener);
      this.hub.off(queue, listener);
      if ([...this.listeners.values()].every((s) => s.size === 0)) this.unwatchWal();
    };
  }

  close(): void {
    for (const [queue, set] of this.listeners) for (const listener of set) this.hub.off(queue, listener);
    this.listeners.clear();
    this.unwatchWal();
    const hub = hubs.get(this.file);
    if (hub !== undefined && --hub.users === 0) hubs.delete(this.file);
  }

  private watchWal(): void {
    if (this.watcher !== null) return;
    try {
      this.watcher = watch(this.walFile, { persistent: false }, () => this.walChanged());
      this.watcher.on('error', () => this.unwatchWal());
    } catch {
      // No WAL file to watch (yet): in-process wake-ups and the worker's own timers still work.
      this.watcher = null;
    }
  }

  private unwatchWal(): void {
    this.watcher?.close();
    this.watcher = null;
  }

  /** Many WAL writes in a burst make one wake-up per subscriber. */
  private walChanged(): void {
    if (this.pending) return;
    this.pending = true;
    setImmediate(() => {
      this.pending = false;
      if (!this.changedElsewhere()) return;
      for (const set of this.listeners.values()) for (const listener of set) listener();
    });
  }
}
