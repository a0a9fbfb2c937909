/**
 * The MVCC key-value store, with etcd's revision rules:
 * - the store starts at revision 1; each write request that changes anything
 *   is one new revision, and its changes are that revision's sub-revisions;
 * - a put sets mod_revision to the new revision, keeps create_revision while
 *   the key lives, and counts version from 1 at creation;
 * - a delete writes a tombstone and ends the key's generation;
 * - a read at a revision sees the newest state at or below it, unless it is
 *   below the compacted revision (compacted) or above the current one (future).
 */
import { EMPTY, keyString } from '../bytes.js';
import { Errors } from '../errors.js';
import type { Event, KeyValue } from '../proto/types.js';
import { EVENT_DELETE, EVENT_PUT } from '../proto/types.js';
import { logId, revisionOf, SUB_LIMIT } from '../storage/schema.js';
import type { KvRow, KvStatements } from './statements.js';

export interface RangeOptions {
  /** 0 for no limit. */
  readonly limit: number;
  /** 0 (or less) for the current revision. */
  readonly rev: number;
  readonly count: boolean;
  /** Skip reading values (keys_only). */
  readonly keysOnly: boolean;
}

export interface RangeResult {
  kvs: KeyValue[];
  count: number;
  /** The revision the store was at (the response header's revision), not the one read. */
  rev: number;
}

/** Keeps the lessor's key sets in step with the keys' leases. */
export interface LeaseAttachments {
  attach(lease: bigint, key: string): void;
  detach(lease: bigint, key: string): void;
}

/** One revision's changes, for watchers. */
export interface RevisionEvents {
  readonly revision: number;
  readonly events: Event[];
}

const NO_LIMIT = -1;
const FULL_OPTIONS: RangeOptions = { limit: 0, rev: 0, count: false, keysOnly: false };

export function rowToKv(row: KvRow): KeyValue {
  return {
    key: row[0],
    createRevision: row[1],
    modRevision: revisionOf(row[2]),
    version: row[3],
    value: row[5] ?? EMPTY,
    lease: row[4] === null ? 0n : BigInt(row[4]),
  };
}

export class KvStore {
  currentRev = 1;
  /** The last compaction's revision; -1 before the first, as in etcd. */
  compactRev = -1;

  constructor(
    private readonly sql: KvStatements,
    private readonly leases: LeaseAttachments,
  ) {}

  /**
   * etcd's rangeKeys: the keys in [key, end) at `opts.rev` as seen by a
   * reader whose current revision is `curRev`. `end` null reads one key,
   * an empty `end` reads every key from `key` on.
   */
  rangeKeys(key: Buffer, end: Buffer | null, curRev: number, opts: RangeOptions): RangeResult {
    let rev = opts.rev;
    if (rev > curRev) throw Errors.futureRev();
    if (rev <= 0) rev = curRev;
    if (rev < this.compactRev) throw Errors.compacted();
    const limit = opts.limit > 0 ? opts.limit : 0;
    // The kv table holds the reader's current state (a write txn's own changes included).
    return rev === curRev
      ? this.rangeCurrent(key, end, curRev, limit, opts)
      : this.rangeAt(key, end, rev, curRev, limit, opts);
  }

  private rangeCurrent(
    key: Buffer,
    end: Buffer | null,
    curRev: number,
    limit: number,
    opts: RangeOptions,
  ): RangeResult {
    const c = this.sql.current;
    if (end === null) {
      const row = (opts.keysOnly || opts.count ? c.keyNoValue : c.key).get(key) as KvRow | undefined;
      if (row === undefined) return { kvs: [], count: 0, rev: curRev };
      return { kvs: opts.count ? [] : [rowToKv(row)], count: 1, rev: curRev };
    }
    if (opts.count) {
      const count = (end.length === 0 ? c.countFrom.get(key) : c.countRange.get(key, end)) as number;
      return { kvs: [], count, rev: curRev };
    }
    const sqlLimit = limit > 0 ? limit : NO_LIMIT;
    let rows: KvRow[];
    if (end.length === 0) rows = (opts.keysOnly ? c.fromNoValue : c.from).all(key, sqlLimit) as KvRow[];
    else rows = (opts.keysOnly ? c.rangeNoValue : c.range).all(key, end, sqlLimit) as KvRow[];
    let count = rows.length;
    if (limit > 0 && rows.length === limit) {
      count = (end.length === 0 ? c.countFrom.get(key) : c.countRange.get(key, end)) as number;
    }
    return { kvs: rows.map(rowToKv), count, rev: curRev };
  }

  private rangeAt(
    key: Buffer,
    end: Buffer | null,
    rev: number,
    curRev: number,
    limit: number,
    opts: RangeOptions,
  ): RangeResult {
    const a = this.sql.at;
    const before = logId(rev + 1, 0);
    if (end === null) {
      const row = a.key.get({ key, before }) as KvRow | undefined;
      if (row === undefined || row[3] === 0) return { kvs: [], count: 0, rev: curRev };
      return { kvs: opts.count ? [] : [rowToKv(row)], count: 1, rev: curRev };
    }
    const params = end.length === 0 ? { key, before } : { key, end, before };
    const countStmt = end.length === 0 ? a.countFrom : a.countRange;
    if (opts.count) return { kvs: [], count: countStmt.get(params) as number, rev: curRev };
    const rows = (end.length === 0 ? a.from : a.range).all({
      ...params,
      limit: limit > 0 ? limit : NO_LIMIT,
    }) as KvRow[];
    let count = rows.length;
    if (limit > 0 && rows.length === limit) count = countStmt.get(params) as number;
    const kvs = rows.map(rowToKv);
    if (opts.keysOnly) for (const kv of kvs) kv.value = EMPTY;
    return { kvs, count, rev: curRev };
  }

  /** A reader's view: the current revision and the compacted one. */
  read(): ReadView {
    return new ReadView(this, this.currentRev, this.compactRev);
  }

  /** Starts a write; its changes become one revision when `end()` is called. */
  write(): WriteTxn {
    return new WriteTxn(this, this.sql, this.leases);
  }

  /** The newest live row of a key below a revision (etcd's Range(key, rev)), or null. */
  keyAt(key: Buffer, rev: number): KeyValue | null {
    if (rev < this.compactRev || rev <= 0) return null;
    const row = this.sql.at.key.get({ key, before: logId(rev + 1, 0) }) as KvRow | undefined;
    return row === undefined || row[3] === 0 ? null : rowToKv(row);
  }
}

export class ReadView {
  constructor(
    private readonly store: KvStore,
    readonly rev: number,
    readonly firstRev: number,
  ) {}

  range(key: Buffer, end: Buffer | null, opts: RangeOptions = FULL_OPTIONS): RangeResult {
    return this.store.rangeKeys(key, end, this.rev, opts);
  }
}

export class WriteTxn {
  readonly beginRev: number;
  readonly events: Event[] = [];

  constructor(
    private readonly store: KvStore,
    private readonly sql: KvStatements,
    private readonly leases: LeaseAttachments,
  ) {
    this.beginRev = store.currentRev;
  }

  /** The revision the txn writes at, and reads at once it has written. */
  get rev(): number {
    return this.beginRev;
  }

  get firstRev(): number {
    return this.store.compactRev;
  }

  private get readRev(): number {
    return this.events.length > 0 ? this.beginRev + 1 : this.beginRev;
  }

  range(key: Buffer, end: Buffer | null, opts: RangeOptions = FULL_OPTIONS): RangeResult {
    return this.store.rangeKeys(key, end, this.readRev, opts);
  }

  /** Writes the key and returns the new revision. */
  put(key: Buffer, value: Buffer, lease: bigint): number {
    const rev = this.beginRev + 1;
    const sub = this.events.length;
    const prior = this.sql.meta.get(key) as [number, number, number, string | null] | undefined;
    const createRev = prior === undefined ? rev : prior[0];
    const version = prior === undefined ? 1 : prior[2] + 1;
    const oldLease = prior === undefined || prior[3] === null ? 0n : BigInt(prior[3]);
    const id = logId(rev, sub);
    this.sql.insertLog.run(id, key, createRev, version, lease, value);
    this.sql.upsertKv.run(key, id, createRev, version, lease);
    if (oldLease !== 0n || lease !== 0n) {
      const name = keyString(key);
      if (oldLease !== 0n) this.leases.detach(oldLease, name);
      if (lease !== 0n) this.leases.attach(lease, name);
    }
    this.events.push({
      type: EVENT_PUT,
      kv: { key, createRevision: createRev, modRevision: rev, version, value, lease },
      prevKv: null,
    });
    return rev;
  }

  /** Deletes the live keys in [key, end) (one key when `end` is null); returns how many and the revision. */
  deleteRange(key: Buffer, end: Buffer | null): { deleted: number; rev: number } {
    let rows: [Buffer, string | null][];
    if (end === null) {
      const meta = this.sql.meta.get(key) as [number, number, number, string | null] | undefined;
      rows = meta === undefined ? [] : [[key, meta[3]]];
    } else if (end.length === 0) rows = this.sql.deleteFrom.all(key) as [Buffer, string | null][];
    else rows = this.sql.deleteRange.all(key, end) as [Buffer, string | null][];
    if (this.events.length + rows.length > SUB_LIMIT) throw Errors.requestTooLarge();
    for (const [name, lease] of rows) this.deleteKey(name, lease === null ? 0n : BigInt(lease));
    if (rows.length > 0 || this.events.length > 0) return { deleted: rows.length, rev: this.beginRev + 1 };
    return { deleted: 0, rev: this.beginRev };
  }

  private deleteKey(key: Buffer, lease: bigint): void {
    const rev = this.beginRev + 1;
    this.sql.insertLog.run(logId(rev, this.events.length), key, 0, 0, 0, null);
    this.sql.deleteKv.run(key);
    if (lease !== 0n) this.leases.detach(lease, keyString(key));
    this.events.push({
      type: EVENT_DELETE,
      kv: { key, createRevision: 0, modRevision: rev, version: 0, value: EMPTY, lease: 0n },
      prevKv: null,
    });
  }

  /** Number of live keys a DeleteRange would remove, to check a revision's event budget before writing. */
  countRange(key: Buffer, end: Buffer | null): number {
    return this.range(key, end, { limit: 0, rev: 0, count: true, keysOnly: true }).count;
  }

  /** Ends the txn: if it changed anything, the store moves to its revision. Returns the events, or null. */
  end(): RevisionEvents | null {
    if (this.events.length === 0) return null;
    this.store.currentRev = this.beginRev + 1;
    return { revision: this.beginRev + 1, events: this.events };
  }
}
