/**
 * The SQLite layout. One row per message; its `phase` and times give its
 * state (see state.ts). Partial indexes keep each hot query on a small index:
 * pending messages by (queue, filter class, ready time), locks by expiry,
 * finished messages by age for GC.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { StoreLayoutError } from '../errors.js';

export const SCHEMA_VERSION = 1;

export const Phase = { Pending: 0, Locked: 1, Done: 2 } as const;

const DDL = `
CREATE TABLE IF NOT EXISTS kvmq_messages (
  seq           INTEGER PRIMARY KEY,            -- arrival order, for FIFO among equals
  queue         TEXT    NOT NULL,
  id            TEXT    NOT NULL,
  payload       BLOB    NOT NULL,
  encoding      INTEGER NOT NULL,               -- 0 JSON, 1 bytes
  metadata      TEXT    NOT NULL,               -- JSON object
  filters       TEXT    NOT NULL,               -- the filter class, '' for none
  phase         INTEGER NOT NULL,               -- 0 pending, 1 locked, 2 done
  ready_at      INTEGER NOT NULL,               -- pending: claimable from then
  lock_until    INTEGER NOT NULL DEFAULT 0,     -- locked: held until then
  consumer      TEXT,                           -- locked: the holder
  backoff_until INTEGER NOT NULL DEFAULT 0,     -- done: refuses duplicates until then
  requeue       INTEGER NOT NULL DEFAULT 0,     -- locked: queue again when done; pending: a requeue waiting for its backoff
  next_payload  BLOB,                           -- the payload the requeued run carries, if replaced
  next_encoding INTEGER,
  attempt       INTEGER NOT NULL DEFAULT 0,
  outcome       TEXT,
  last_error    TEXT,
  enqueued_at   INTEGER NOT NULL,
  updated_at    INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX IF NOT EXISTS kvmq_messages_by_id ON kvmq_messages (queue, id);
CREATE INDEX IF NOT EXISTS kvmq_messages_ready ON kvmq_messages (queue, filters, ready_at, seq) WHERE phase = 0;
CREATE INDEX IF NOT EXISTS kvmq_messages_locked ON kvmq_messages (queue, lock_until) WHERE phase = 1;
CREATE INDEX IF NOT EXISTS kvmq_messages_done ON kvmq_messages (queue, updated_at) WHERE phase = 2;

-- Per-queue counters and the configuration (zkmq's conf/), kept in the store.
CREATE TABLE IF NOT EXISTS kvmq_queues (
  queue         TEXT    PRIMARY KEY,
  size          INTEGER NOT NULL DEFAULT 0,     -- pending + locked
  dry_runs      INTEGER NOT NULL DEFAULT 0,
  eoq_until     INTEGER NOT NULL DEFAULT 0,     -- queue-wide end-of-queue backoff
  gc_at         INTEGER NOT NULL DEFAULT 0,
  gc_lock_until INTEGER NOT NULL DEFAULT 0,     -- one GC at a time per queue
  config        TEXT                            -- JSON QueueConfig, NULL for defaults
) STRICT, WITHOUT ROWID;

-- Filter classes seen per queue, so a claim asks only for classes a worker accepts.
CREATE TABLE IF NOT EXISTS kvmq_classes (
  queue   TEXT NOT NULL,
  filters TEXT NOT NULL,
  PRIMARY KEY (queue, filters)
) STRICT, WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS kvmq_consumers (
  queue      TEXT    NOT NULL,
  id         TEXT    NOT NULL,
  host       TEXT    NOT NULL,
  pid        INTEGER NOT NULL,
  started_at INTEGER NOT NULL,
  seen_at    INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  PRIMARY KEY (queue, id)
) STRICT, WITHOUT ROWID;
`;

export function migrate(db: BetterSqlite3.Database, path: string): void {
  const version = db.pragma('user_version', { simple: true }) as number;
  if (version > SCHEMA_VERSION) {
    throw new StoreLayoutError(`${path} was written by a newer kvmq (schema ${version}); upgrade kvmq to use it`);
  }
  if (version === SCHEMA_VERSION) return;
  db.transaction(() => {
    db.exec(DDL);
    db.pragma(`user_version = ${SCHEMA_VERSION}`);
  }).immediate();
}
