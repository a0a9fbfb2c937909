/**
 * The prepared SQL of the MVCC store. Rows come back raw (arrays), in the
 * column order of `KV_COLUMNS`: key, create_rev, id, version, lease, value.
 * The lease comes back as text (or null for none), because lease IDs use all
 * 64 bits and a JavaScript number does not.
 */
import type BetterSqlite3 from 'better-sqlite3';

export type KvRow = [
  key: Buffer,
  createRev: number,
  id: number,
  version: number,
  lease: string | null,
  value: Buffer | null,
];

const LEASE = (table: string): string => `CASE ${table}.lease WHEN 0 THEN NULL ELSE CAST(${table}.lease AS TEXT) END`;
const CURRENT = `SELECT k.key, k.create_rev, k.id, k.version, ${LEASE('k')}, l.value FROM kv k JOIN log l ON l.id = k.id`;
const CURRENT_KEYS = `SELECT k.key, k.create_rev, k.id, k.version, ${LEASE('k')}, NULL FROM kv k`;
const LOG = `SELECT l.key, l.create_rev, l.id, l.version, ${LEASE('l')}, l.value FROM log l`;
// The newest row of each key below a log ID, tombstones dropped: the keys' state at a past revision.
const AT = (where: string): string =>
  `${LOG} JOIN (SELECT max(id) AS mid FROM log WHERE ${where} AND id < @before GROUP BY key) g ON l.id = g.mid ` +
  'WHERE l.version > 0 ORDER BY l.key LIMIT @limit';
const COUNT_AT = (where: string): string =>
  `SELECT count(*) FROM log l JOIN (SELECT max(id) AS mid FROM log WHERE ${where} AND id < @before GROUP BY key) g ` +
  'ON l.id = g.mid WHERE l.version > 0';

export interface KvStatements {
  readonly current: {
    readonly key: BetterSqlite3.Statement;
    readonly range: BetterSqlite3.Statement;
    readonly from: BetterSqlite3.Statement;
    readonly keyNoValue: BetterSqlite3.Statement;
    readonly rangeNoValue: BetterSqlite3.Statement;
    readonly fromNoValue: BetterSqlite3.Statement;
    readonly countRange: BetterSqlite3.Statement;
    readonly countFrom: BetterSqlite3.Statement;
  };
  readonly at: {
    readonly key: BetterSqlite3.Statement;
    readonly range: BetterSqlite3.Statement;
    readonly from: BetterSqlite3.Statement;
    readonly countRange: BetterSqlite3.Statement;
    readonly countFrom: BetterSqlite3.Statement;
  };
  /** create_rev, id, version, lease of a live key. */
  readonly meta: BetterSqlite3.Statement;
  /** key, lease of the live keys in a range, for deletion. */
  readonly deleteRange: BetterSqlite3.Statement;
  readonly deleteFrom: BetterSqlite3.Statement;
  readonly insertLog: BetterSqlite3.Statement;
  readonly upsertKv: BetterSqlite3.Statement;
  readonly deleteKv: BetterSqlite3.Statement;
  /** Events in a log ID range: key, create_rev, id, version, lease, value. */
  readonly events: BetterSqlite3.Statement;
  readonly leasedKeys: BetterSqlite3.Statement;
}

export function prepareKv(db: BetterSqlite3.Database): KvStatements {
  const raw = (sql: string): BetterSqlite3.Statement => db.prepare(sql).raw(true);
  const pluck = (sql: string): BetterSqlite3.Statement => db.prepare(sql).pluck(true);
  return {
    current: {
      key: raw(`${CURRENT} WHERE k.key = ?`),
      range: raw(`${CURRENT} WHERE k.key >= ? AND k.key < ? ORDER BY k.key LIMIT ?`),
      from: raw(`${CURRENT} WHERE k.key >= ? ORDER BY k.key LIMIT ?`),
      keyNoValue: raw(`${CURRENT_KEYS} WHERE k.key = ?`),
      rangeNoValue: raw(`${CURRENT_KEYS} WHERE k.key >= ? AND k.key < ? ORDER BY k.key LIMIT ?`),
      fromNoValue: raw(`${CURRENT_KEYS} WHERE k.key >= ? ORDER BY k.key LIMIT ?`),
      countRange: pluck('SELECT count(*) FROM kv WHERE key >= ? AND key < ?'),
      countFrom: pluck('SELECT count(*) FROM kv WHERE key >= ?'),
    },
    at: {
      key: raw(`${LOG} WHERE l.key = @key AND l.id < @before ORDER BY l.id DESC LIMIT 1`),
      range: raw(AT('key >= @key AND key < @end')),
      from: raw(AT('key >= @key')),
      countRange: pluck(COUNT_AT('key >= @key AND key < @end')),
      countFrom: pluck(COUNT_AT('key >= @key')),
    },
    meta: raw(`SELECT create_rev, id, version, ${LEASE('kv')} FROM kv WHERE key = ?`),
    deleteRange: raw(`SELECT key, ${LEASE('kv')} FROM kv WHERE key >= ? AND key < ? ORDER BY key`),
    deleteFrom: raw(`SELECT key, ${LEASE('kv')} FROM kv WHERE key >= ? ORDER BY key`),
    insertLog: db.prepare('INSERT INTO log (id, key, create_rev, version, lease, value) VALUES (?, ?, ?, ?, ?, ?)'),
    upsertKv: db.prepare(
      'INSERT INTO kv (key, id, create_rev, version, lease) VALUES (?, ?, ?, ?, ?) ' +
        'ON CONFLICT (key) DO UPDATE SET id = excluded.id, create_rev = excluded.create_rev, ' +
        'version = excluded.version, lease = excluded.lease',
    ),
    deleteKv: db.prepare('DELETE FROM kv WHERE key = ?'),
    events: raw(`${LOG} WHERE l.id >= ? AND l.id < ? ORDER BY l.id LIMIT ?`),
    leasedKeys: raw(`SELECT key, CAST(lease AS TEXT) FROM kv WHERE lease != 0`),
  };
}
