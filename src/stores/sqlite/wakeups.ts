/**
 * Wake-ups for idle workers. Within a process, a commit that makes messages
 * ready wakes that queue's subscribers directly. Across processes sharing the
 * file, the committing process then writes a byte to `<db>-wake`, and every
 * other process watching that file (inotify through fs.watch) wakes its
 * subscribers, once SQLite's data_version shows another connection committed.
 *
 * The wake file, not the WAL, is watched because a WAL write is seen before
 * its commit is visible: checking data_version at that moment would miss it.
 * The byte is written after the commit, so the check cannot come too early.
 * A wake-up is only a hint to claim again: a spurious one is cheap, a missed
 * one would leave a worker idle until its end-of-queue backoff.
 *
 * The same machinery, on a file of its own (`<db>-cancel`), tells workers of cancels (src/stores/sqlite/cancels.ts):
 * within the process with the canceled message, across processes as a bare hint (null).
 */
import { EventEmitter } from 'node:events';
import { closeSync, constants, openSync, watch, writeSync, type FSWatcher } from 'node:fs';
import { QueueListeners } from '../contract/queue-listeners.js';

// Every store instance on the same file in this process shares one hub.
const hubs = new Map<string, { emitter: EventEmitter; users: number }>();
const BYTE = Buffer.from([1]);
// Other processes hear of new events at most this late: a byte per transaction would cost every claim and
// finish a write and a wake-up of each watcher, while an event reader can wait a few ms.
const EVENTS_TELL_MS = 15;

/** Told a value where the change happened in this process; null when it was heard of from another. */
type Listener<V> = (value: V | null) => void;

export class Wakeups<V = never> {
  private readonly hub: EventEmitter;
  private readonly listeners = new QueueListeners<V | null>();
  private readonly hubKey: string;
  private readonly wakeFile: string;
  private wakeFd: number | null;
  private watcher: FSWatcher | null = null;
  private pending = false;
  private eventsTimer: NodeJS.Timeout | null = null;

  /**
   * @param changedElsewhere true when another connection committed since the
   *   last call (SQLite's data_version), so this process's own commits, which
   *   already woke its subscribers, do not wake them again.
   * @param suffix names the watched file beside the database, and keeps its subscribers apart from another's.
   */
  constructor(
    file: string,
    private readonly changedElsewhere: () => boolean,
    suffix = '-wake',
  ) {
    this.wakeFile = `${file}${suffix}`;
    this.hubKey = this.wakeFile;
    let hub = hubs.get(this.hubKey);
    if (hub === undefined) {
      hub = { emitter: new EventEmitter(), users: 0 };
      hub.emitter.setMaxListeners(0);
      hubs.set(this.hubKey, hub);
    }
    hub.users += 1;
    this.hub = hub.emitter;
    this.wakeFd = openSync(this.wakeFile, constants.O_CREAT | constants.O_WRONLY);
  }

  /**
   * Tells subscribers of each channel (a queue's name: messages may be ready; or eventsChannel(queue)), here and
   * in other processes, that something changed. Call after the commit; one byte tells the other processes.
   */
  notify(...channels: readonly string[]): void {
    for (const channel of channels) this.hub.emit(channel, null);
    if (this.wakeFd !== null) writeSync(this.wakeFd, BYTE, 0, 1, 0);
  }

  /** Like notify for one channel, its subscribers in this process told `value`. */
  notifyWith(channel: string, value: V): void {
    this.hub.emit(channel, value);
    if (this.wakeFd !== null) writeSync(this.wakeFd, BYTE, 0, 1, 0);
  }

  /** Like notify for event channels: this process's readers at once, other processes' within EVENTS_TELL_MS. */
  notifySoon(...channels: readonly string[]): void {
    for (const channel of channels) this.hub.emit(channel, null);
    if (this.eventsTimer !== null || this.wakeFd === null) return;
    this.eventsTimer = setTimeout(() => {
      this.eventsTimer = null;
      if (this.wakeFd !== null) writeSync(this.wakeFd, BYTE, 0, 1, 0);
    }, EVENTS_TELL_MS);
    this.eventsTimer.unref();
  }

  subscribe(channel: string, listener: Listener<V>): () => void {
    const remove = this.listeners.add(channel, listener);
    this.hub.on(channel, listener);
    this.watchWakeFile();
    return () => {
      remove();
      this.hub.off(channel, listener);
      if (this.listeners.queues().length === 0) this.unwatch();
    };
  }

  close(): void {
    for (const [channel, listener] of this.listeners.entries()) this.hub.off(channel, listener);
    this.listeners.clear();
    this.unwatch();
    if (this.eventsTimer !== null) clearTimeout(this.eventsTimer);
    if (this.wakeFd !== null) closeSync(this.wakeFd);
    this.wakeFd = null;
    const hub = hubs.get(this.hubKey);
    if (hub !== undefined && --hub.users === 0) hubs.delete(this.hubKey);
  }

  private watchWakeFile(): void {
    if (this.watcher !== null) return;
    this.watcher = watch(this.wakeFile, { persistent: false }, () => this.touched());
    this.watcher.on('error', () => this.unwatch());
  }

  private unwatch(): void {
    this.watcher?.close();
    this.watcher = null;
  }

  /** Many touches in a burst make one wake-up per subscriber. */
  private touched(): void {
    if (this.pending) return;
    this.pending = true;
    setImmediate(() => {
      this.pending = false;
      if (!this.changedElsewhere()) return;
      for (const channel of this.listeners.queues()) this.listeners.notify(channel, null);
    });
  }
}

/** The channel that tells a queue's event readers new events may exist (queue names cannot hold a ':'). */
export function eventsChannel(queue: string): string {
  return `events:${queue}`;
}
