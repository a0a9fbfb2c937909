/**
 * The server's SQLite layout.
 *
 * `log` is the MVCC history: one row per event, keyed by
 * `revision * 2^20 + sub` (etcd's main and sub revision) so that history
 * scans are rowid scans. A tombstone (deletion) has version 0 and no value.
 * `kv` is the current state: one row per live key, pointing at the log row of
 * its last put. Leases, auth and alarms have a table each; `meta` holds the
 * store's identity and counters.
 */
import type BetterSqlite3 from 'better-sqlite3';

export const FORMAT = 'kvmq-serve 1';

/** Events one revision may hold: the sub revision's share of a log row ID. */
export const SUB_LIMIT = 2 ** 20;

export function logId(revision: number, sub: number): number {
  return revision * SUB_LIMIT + sub;
}

export function revisionOf(id: number): number {
  return Math.floor(id / SUB_LIMIT);
}

const TABLES = `
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS log (
  id INTEGER PRIMARY KEY,
  key BLOB NOT NULL,
  create_rev INTEGER NOT NULL,
  version INTEGER NOT NULL,
  lease INTEGER NOT NULL,
  value BLOB
);
CREATE INDEX IF NOT EXISTS log_key ON log (key, id);
CREATE TABLE IF NOT EXISTS kv (
  key BLOB PRIMARY KEY,
  id INTEGER NOT NULL,
  create_rev INTEGER NOT NULL,
  version INTEGER NOT NULL,
  lease INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS lease (id INTEGER PRIMARY KEY, ttl INTEGER NOT NULL, deadline_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS auth_user (
  name TEXT PRIMARY KEY,
  password TEXT NOT NULL,
  no_password INTEGER NOT NULL,
  roles TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS auth_role (name TEXT PRIMARY KEY, perms TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS alarm (member TEXT NOT NULL, type INTEGER NOT NULL, PRIMARY KEY (member, type)) WITHOUT ROWID;
`;

/** Tables a kvmq serve file has; a file with other tables is someone else's. */
const KNOWN = new Set(['meta', 'log', 'kv', 'lease', 'auth_user', 'auth_role', 'alarm']);

export class LayoutError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'LayoutError';
  }
}

/** Creates the tables in a new file, or checks that an existing file is ours and current. */
export function migrate(db: BetterSqlite3.Database, path: string): { created: boolean } {
  const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all() as string[]).filter(
    (name) => !name.startsWith('sqlite_'),
  );
  const foreign = tables.filter((name) => !KNOWN.has(name));
  if (foreign.length > 0) {
    throw new LayoutError(
      `${path} holds tables kvmq serve did not create (${foreign.join(', ')}); give kvmq serve its own --data directory`,
    );
  }
  if (tables.length > 0) {
    if (!tables.includes('meta')) throw new LayoutError(`${path} is not a kvmq serve file (it has no meta table)`);
    const format = db.prepare("SELECT value FROM meta WHERE name = 'format'").pluck().get() as string | undefined;
    if (format !== FORMAT) {
      throw new LayoutError(
        `${path} is in format ${JSON.stringify(format ?? 'unknown')}, not ${JSON.stringify(FORMAT)}; ` +
          'it was written by another version of kvmq serve',
      );
    }
    return { created: false };
  }
  db.transaction(() => {
    db.exec(TABLES);
    db.prepare("INSERT INTO meta (name, value) VALUES ('format', ?)").run(FORMAT);
  })();
  return { created: true };
}
