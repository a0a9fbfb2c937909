/**
 * The watchers of every stream, as etcd's watchable store keeps them:
 * - a synced watcher receives each committed revision's matching events as
 *   one response whose header is that revision;
 * - a watcher created at a past revision is unsynced: it catches up from the
 *   history, up to 1000 revisions per response with the current revision in
 *   the header, then joins the synced ones;
 * - an unsynced watcher whose next revision has been compacted is answered
 *   with the compact revision and cancelled.
 */
import { keyString } from '../bytes.js';
import type { KvStore, RevisionEvents } from '../mvcc/kvstore.js';
import { rowToKv } from '../mvcc/kvstore.js';
import type { KvRow } from '../mvcc/statements.js';
import type { Event } from '../proto/types.js';
import { EVENT_DELETE, EVENT_PUT } from '../proto/types.js';
import { logId, revisionOf } from '../storage/schema.js';
import type BetterSqlite3 from 'better-sqlite3';

/** etcd's watchBatchMaxRevs: revisions one catch-up response may span. */
export const MAX_REVISIONS_PER_RESPONSE = 1000;
/**
 * A catch-up response stops at the revision where it passes this size (etcd bounds it by revisions
 * only), so that a watcher catching up on large values does not get a response over a client's
 * receive limit (4 MiB by default in gRPC clients).
 */
const CATCH_UP_BYTES = 1024 * 1024;
/** History rows read per query while catching up. */
const CATCH_UP_ROWS = 5000;
/** How often paused watchers look whether their client has drained. */
const RESUME_CHECK_MS = 100;

export interface WatcherSink {
  /**
   * Whether the watcher's client takes responses now. A stream whose client reads slower than events come
   * (its unsent responses past a high-water mark) says no: its watchers pause, and catch up from the
   * history once it drains, as etcd's "victim" watchers do, so a slow client costs no unbounded memory.
   */
  ready(): boolean;
  /** Sends events (or, with none, a progress notification) for this watcher. */
  deliver(watcher: Watcher, events: Event[], revision: number): void;
  /** Tells the watcher's stream its start revision was compacted. */
  compacted(watcher: Watcher, compactRevision: number): void;
}

export class Watcher {
  /** The next revision this watcher needs. */
  minRev = 0;
  synced = false;
  removed = false;
  /** Set when the watcher was cancelled for compaction; its ID stays taken until the client cancels it. */
  compacted = false;

  constructor(
    readonly id: number,
    readonly key: Buffer,
    /** null: the one key; empty: every key from `key`; else [key, end). */
    readonly end: Buffer | null,
    readonly startRev: number,
    readonly noPut: boolean,
    readonly noDelete: boolean,
    readonly prevKv: boolean,
    readonly fragment: boolean,
    readonly sink: WatcherSink,
  ) {}

  matches(key: Buffer): boolean {
    if (this.end === null) return key.equals(this.key);
    if (Buffer.compare(key, this.key) < 0) return false;
    return this.end.length === 0 || Buffer.compare(key, this.end) < 0;
  }

  /** The events this watcher's filters let through. */
  filter(events: Event[]): Event[] {
    if (!this.noPut && !this.noDelete) return events;
    return events.filter((ev) => !(ev.type === EVENT_PUT ? this.noPut : this.noDelete));
  }
}

/** The revision and the compaction as they are on disk. */
export interface DurableState {
  readonly durableRev: number;
  readonly durableCompactRev: number;
}

export class WatchHub {
  private readonly byKey = new Map<string, Set<Watcher>>();
  private readonly ranges = new Set<Watcher>();
  private readonly unsynced = new Set<Watcher>();
  /** Watchers whose client is behind: no events until it drains, then they catch up. */
  private readonly paused = new Set<Watcher>();
  private resumeTimer: NodeJS.Timeout | null = null;
  private syncScheduled = false;
  private readonly keyEvents: BetterSqlite3.Statement;
  private readonly rangeEvents: BetterSqlite3.Statement;
  private readonly fromEvents: BetterSqlite3.Statement;

  constructor(
    private readonly kv: KvStore,
    db: BetterSqlite3.Database,
    /** What is on disk: watchers hear of nothing beyond it (later revisions come with their notification). */
    private readonly durable: DurableState,
  ) {
    const cols = 'SELECT key, create_rev, id, version, CASE lease WHEN 0 THEN NULL ELSE CAST(lease AS TEXT) END, value';
    this.keyEvents = db
      .prepare(`${cols} FROM log WHERE key = ? AND id >= ? AND id < ? ORDER BY id LIMIT ${CATCH_UP_ROWS}`)
      .raw(true);
    this.rangeEvents = db
      .prepare(`${cols} FROM log WHERE key >= ? AND key < ? AND id >= ? AND id < ? ORDER BY id LIMIT ${CATCH_UP_ROWS}`)
      .raw(true);
    this.fromEvents = db
      .prepare(`${cols} FROM log WHERE key >= ? AND id >= ? AND id < ? ORDER BY id LIMIT ${CATCH_UP_ROWS}`)
      .raw(true);
  }

  /** The revision watch responses stand at. */
  durableRev(): number {
    return this.durable.durableRev;
  }

  get size(): number {
    let n = this.ranges.size + this.unsynced.size;
    for (const set of this.byKey.values()) n += set.size;
    return n;
  }

  add(w: Watcher): void {
    const current = this.durable.durableRev;
    if (w.startRev === 0 || w.startRev > current) {
      w.minRev = Math.max(current + 1, w.startRev);
      this.addSynced(w);
    } else {
      w.minRev = w.startRev;
      this.unsynced.add(w);
      this.scheduleSync();
    }
  }

  remove(w: Watcher): void {
    w.removed = true;
    this.unsynced.delete(w);
    this.paused.delete(w);
    this.removeSynced(w);
  }

  /** Stops sending to `w` until its client drains; it will catch up from `fromRev`. */
  private pause(w: Watcher, fromRev: number): void {
    this.removeSynced(w);
    this.unsynced.delete(w);
    w.minRev = fromRev;
    this.paused.add(w);
    if (this.resumeTimer === null) {
      this.resumeTimer = setInterval(() => this.resume(), RESUME_CHECK_MS);
      this.resumeTimer.unref();
    }
  }

  private resume(): void {
    for (const w of this.paused) {
      if (w.removed || w.sink.ready()) {
        this.paused.delete(w);
        if (!w.removed) this.unsynced.add(w);
      }
    }
    if (this.paused.size === 0 && this.resumeTimer !== null) {
      clearInterval(this.resumeTimer);
      this.resumeTimer = null;
    }
    if (this.unsynced.size > 0) this.scheduleSync();
  }

  private addSynced(w: Watcher): void {
    w.synced = true;
    if (w.end === null) {
      const name = keyString(w.key);
      let set = this.byKey.get(name);
      if (set === undefined) {
        set = new Set();
        this.byKey.set(name, set);
      }
      set.add(w);
    } else this.ranges.add(w);
  }

  private removeSynced(w: Watcher): void {
    if (!w.synced) return;
    w.synced = false;
    if (w.end === null) {
      const name = keyString(w.key);
      const set = this.byKey.get(name);
      set?.delete(w);
      if (set?.size === 0) this.byKey.delete(name);
    } else this.ranges.delete(w);
  }

  /** Sends one committed revision's events to the synced watchers they match. */
  notify(rev: RevisionEvents): void {
    if (this.byKey.size === 0 && this.ranges.size === 0) return;
    const batches = new Map<Watcher, Event[]>();
    const add = (w: Watcher, ev: Event): void => {
      if (ev.kv.modRevision < w.minRev) return;
      const list = batches.get(w);
      if (list === undefined) batches.set(w, [ev]);
      else list.push(ev);
    };
    for (const ev of rev.events) {
      if (this.byKey.size > 0) {
        const set = this.byKey.get(keyString(ev.kv.key));
        if (set !== undefined) for (const w of set) add(w, ev);
      }
      for (const w of this.ranges) if (w.matches(ev.kv.key)) add(w, ev);
    }
    for (const [w, events] of batches) {
      const passed = w.filter(events);
      if (passed.length === 0) continue;
      if (w.sink.ready()) w.sink.deliver(w, passed, rev.revision);
      else this.pause(w, rev.revision);
    }
  }

  /** A progress notification for a synced watcher (etcd sends none to one still catching up). */
  progress(w: Watcher): void {
    if (w.synced && !w.removed) w.sink.deliver(w, [], this.durable.durableRev);
  }

  private scheduleSync(): void {
    if (this.syncScheduled) return;
    this.syncScheduled = true;
    setImmediate(() => {
      this.syncScheduled = false;
      this.syncWatchers();
    });
  }

  /** One catch-up step for every unsynced watcher. */
  private syncWatchers(): void {
    const current = this.durable.durableRev;
    const compactRev = this.durable.durableCompactRev;
    for (const w of [...this.unsynced]) {
      if (w.removed) continue;
      if (w.minRev < compactRev) {
        this.unsynced.delete(w);
        w.compacted = true;
        w.sink.compacted(w, compactRev);
        continue;
      }
      if (!w.sink.ready()) {
        this.pause(w, w.minRev);
        continue;
      }
      const { events, moreRev } = this.readHistory(w, current);
      const passed = w.filter(events);
      if (passed.length > 0) w.sink.deliver(w, passed, current);
      if (moreRev !== 0) {
        w.minRev = moreRev;
        continue;
      }
      this.unsynced.delete(w);
      w.minRev = Math.max(w.minRev, current + 1);
      this.addSynced(w);
    }
    if (this.unsynced.size > 0) this.scheduleSync();
  }

  /** Events for `w` from its minRev to `current`, up to MAX_REVISIONS_PER_RESPONSE revisions. */
  private readHistory(w: Watcher, current: number): { events: Event[]; moreRev: number } {
    const events: Event[] = [];
    let revs = 0;
    let lastRev = 0;
    let bytes = 0;
    let from = logId(w.minRev, 0);
    const until = logId(current + 1, 0);
    for (;;) {
      let rows: KvRow[];
      if (w.end === null) rows = this.keyEvents.all(w.key, from, until) as KvRow[];
      else if (w.end.length === 0) rows = this.fromEvents.all(w.key, from, until) as KvRow[];
      else rows = this.rangeEvents.all(w.key, w.end, from, until) as KvRow[];
      for (const row of rows) {
        const rev = revisionOf(row[2]);
        if (rev !== lastRev) {
          revs++;
          lastRev = rev;
          // A watcher that asked for fragments gets etcd's grouping: its large responses are split anyway.
          if (revs > MAX_REVISIONS_PER_RESPONSE || (bytes > CATCH_UP_BYTES && !w.fragment))
            return { events, moreRev: rev };
        }
        events.push(rowToEvent(row));
        bytes += row[0].length + (row[5]?.length ?? 0) + 32;
      }
      if (rows.length < CATCH_UP_ROWS) return { events, moreRev: 0 };
      from = (rows[rows.length - 1] as KvRow)[2] + 1;
    }
  }
}

function rowToEvent(row: KvRow): Event {
  const kv = rowToKv(row);
  if (row[3] === 0) {
    return { type: EVENT_DELETE, kv: { ...kv, createRevision: 0, version: 0, lease: 0n }, prevKv: null };
  }
  return { type: EVENT_PUT, kv, prevKv: null };
}
