/**
 * The SQLite layout. One row per message; its `phase` and times give its
 * state (see state.ts). Partial indexes keep each hot query on a small index:
 * pending messages by (queue, filter class, priority, ready time), locks by expiry,
 * finished and failed messages by age for GC and listing, duplicate backoffs
 * by their end. Per-queue counters (pending + locked, done, failed) change in
 * the same transaction as the rows, so counts never read the backlog.
 * Queue events are rows of their own table, written in the transaction of
 * the transition they describe, read by (queue, seq). Schema 4 orders pending
 * messages by priority within their class, and adds groups, debounce ids and
 * each queue's rate limit state. Schedules (schema 5) are rows of (queue,
 * name), their next slot compared and set when they fire. Schema 6 keeps a
 * queue's newest events in its queue row until a few gather (events.ts).
 * Schema 7 writes event lists in a compact text (event-text.ts) instead of
 * JSON (rows written before stay JSON and are read as such), in a rowid
 * table whose newest row grows until it fills a page. Schema 8 adds handlers' reports (progress, log) in
 * a table of their own, keyed by the message's seq (reports.ts).
 * Schema 9 keeps a success's result with the message (result, result_encoding; NULL for none).
 * Schema 10 keeps each group's rate limit state (kvmq_group_rates) for a queue's groupRateLimit.
 * Schema 11 indexes waiting messages by the deadline of their time to live (in their policy), for the GC.
 * Schema 12 adds flows (flows.ts): a child's parent, a parent's count of children not ended, phase 4
 * (`waiting-children`) and each queue's count of parents in it.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { StoreLayoutError } from '../../model/errors.js';

export const Phase = { Pending: 0, Locked: 1, Done: 2, Failed: 3, WaitingChildren: 4 } as const;

// Indexes schema 2 added: failed messages by finish time, done messages by the end of their backoff
// (plain successes, backoff_until 0, stay out of it).
const INDEXES_2 = `
CREATE INDEX IF NOT EXISTS kvmq_messages_failed ON kvmq_messages (queue, updated_at) WHERE phase = 3;
CREATE INDEX IF NOT EXISTS kvmq_messages_backoff ON kvmq_messages (queue, backoff_until) WHERE phase = 2 AND backoff_until > 0;
`;

// Columns schema 6 added: a queue's newest events, not yet a kvmq_events row. The queue row is written by most
// transactions that write events (enqueue and finish change its counters), so buffering them there spares the
// events b-tree's page in most commits; they move to a row of their own every few events (events.ts).
const QUEUE_COLUMNS_6 = `
ALTER TABLE kvmq_queues ADD COLUMN events_buffer TEXT NOT NULL DEFAULT '';
ALTER TABLE kvmq_queues ADD COLUMN events_buffered INTEGER NOT NULL DEFAULT 0;
`;

// Tables schema 3 added: queue events (replaced by eventsTable7's) and turns. A transaction's events for a
// queue are one row (a JSON list) of one b-tree keyed by (queue, seq), so recording them dirties one page per
// transaction. A queue's newest row is never deleted (a trim empties it instead), so its seq never goes back
// and no cursor reads a later event as an earlier one.
const EVENTS_3 = `
CREATE TABLE IF NOT EXISTS kvmq_events (
  queue   TEXT    NOT NULL,
  seq     INTEGER NOT NULL,                     -- its first event's number in the queue; a cursor is seq.index
  at      INTEGER NOT NULL,                     -- when the transaction wrote them
  first   INTEGER NOT NULL DEFAULT 0,           -- events before this index were trimmed
  count   INTEGER NOT NULL,                     -- events in the list
  events  TEXT    NOT NULL,                     -- JSON [[type (index in QUEUE_EVENT_TYPES), id, attempt, error?], ...]
  PRIMARY KEY (queue, seq)
) STRICT, WITHOUT ROWID;
`;

const TURNS_3 = `
-- One row per (queue, name): the turn is free again from taken_at + the caller's everyMs.
CREATE TABLE IF NOT EXISTS kvmq_turns (
  queue    TEXT    NOT NULL,
  name     TEXT    NOT NULL,
  taken_at INTEGER NOT NULL,
  PRIMARY KEY (queue, name)
) STRICT, WITHOUT ROWID;
`;
const TABLES_3 = EVENTS_3 + TURNS_3;

// Indexes schema 4 added. Pending messages by (class, priority, ready time): a claim reads one priority at a time,
// the lowest first, and within it the oldest ready first, never touching lower priorities. Held messages of a group,
// so a claim counts each group's holds on a few index entries. Waiting messages by debounce id.
const INDEXES_4 = `
CREATE INDEX IF NOT EXISTS kvmq_messages_pending ON kvmq_messages (queue, filters, priority, ready_at, seq) WHERE phase = 0;
CREATE INDEX IF NOT EXISTS kvmq_messages_group_held ON kvmq_messages (queue, group_name, lock_until)
  WHERE phase = 1 AND group_name IS NOT NULL;
CREATE INDEX IF NOT EXISTS kvmq_messages_debounce ON kvmq_messages (queue, debounce_id, seq)
  WHERE phase = 0 AND debounce_id IS NOT NULL;
`;

// The table schema 5 added: each queue's schedules (src/schedule/), the body opaque JSON, next_at the next slot
// not yet enqueued, which fireSchedule compares and sets in the transaction that enqueues the due slots.
const TABLES_5 = `
CREATE TABLE IF NOT EXISTS kvmq_schedules (
  queue   TEXT    NOT NULL,
  name    TEXT    NOT NULL,
  body    TEXT    NOT NULL,
  next_at INTEGER NOT NULL,
  PRIMARY KEY (queue, name)
) STRICT, WITHOUT ROWID;
`;

// The events table since schema 7: a rowid table, so a queue's newest row can grow in place as its events move
// out of the queue row (one page written, where inserting rows of a WITHOUT ROWID table splits a leaf every
// few rows and rewrites its siblings), and rows are appended at the table's end whatever the queue; (queue, seq)
// is a small index entry per row. Columns as in schema 3; `events` in event-text.ts's text, or JSON before.
const eventsTable7 = (name: string): string => `
CREATE TABLE IF NOT EXISTS ${name} (
  id      INTEGER PRIMARY KEY,                  -- append order
  queue   TEXT    NOT NULL,
  seq     INTEGER NOT NULL,                     -- its first event's number in the queue; a cursor is seq.index
  at      INTEGER NOT NULL,                     -- when its newest event was written
  first   INTEGER NOT NULL DEFAULT 0,           -- events before this index were trimmed
  count   INTEGER NOT NULL,                     -- events in the list
  events  TEXT    NOT NULL                      -- the list (event-text.ts); before schema 7 JSON [[type, id, attempt, error?, at?], ...]
) STRICT;
CREATE UNIQUE INDEX IF NOT EXISTS kvmq_events_by_seq ON ${name} (queue, seq);
`;

// The table schema 10 added: per (queue, group), the groupRateLimit's theoretical arrival time
// (model/rate-limit.ts), as kvmq_queues.rate_tat is the queue's; written only by claims under that limit.
const GROUP_RATES_10 = `
CREATE TABLE IF NOT EXISTS kvmq_group_rates (
  queue      TEXT NOT NULL,
  group_name TEXT NOT NULL,
  tat        REAL NOT NULL,
  PRIMARY KEY (queue, group_name)
) STRICT, WITHOUT ROWID;
`;

// The table schema 8 added: a message's progress and log (reports.ts), deleted with its message by a trigger.
const REPORTS_8 = `
CREATE TABLE IF NOT EXISTS kvmq_reports (
  seq      INTEGER PRIMARY KEY,                 -- the message's kvmq_messages.seq
  progress TEXT,                                -- the latest progress, JSON; NULL for none
  log      TEXT,                                -- JSON list of the kept lines, oldest first; NULL for none
  dropped  INTEGER NOT NULL DEFAULT 0           -- older lines dropped to keep the log bounded
) STRICT;
CREATE TRIGGER IF NOT EXISTS kvmq_reports_gone AFTER DELETE ON kvmq_messages
  BEGIN DELETE FROM kvmq_reports WHERE seq = old.seq; END;
`;

// Waiting messages with a time to live, by its deadline (model/policy.ts expireAt), for the GC's sweep. Only those
// are in it: a message without one costs its insert the evaluation of this WHERE, nothing more.
const EXPIRY_11 = `
CREATE INDEX IF NOT EXISTS kvmq_messages_expiry ON kvmq_messages (queue, json_extract(policy, '$.expireAt'))
  WHERE phase = 0 AND json_extract(policy, '$.expireAt') IS NOT NULL;
`;

// Schema 12: flows. A child names its parent by seq (kept when it moves to a dead-letter queue) and owes it one
// count while parent_wait is 1; a parent in phase 4 counts its children not ended in children_left. Plain
// messages keep the defaults (NULL, 0), so their finishes never look further. Waiting parents are counted per
// queue in kvmq_queues.waiting (not in size: they are neither pending nor held).
const FLOWS_12 = `
ALTER TABLE kvmq_messages ADD COLUMN parent_seq INTEGER;
ALTER TABLE kvmq_messages ADD COLUMN parent_wait INTEGER NOT NULL DEFAULT 0;
ALTER TABLE kvmq_messages ADD COLUMN child_failure INTEGER NOT NULL DEFAULT 0;
ALTER TABLE kvmq_messages ADD COLUMN children_left INTEGER NOT NULL DEFAULT 0;
ALTER TABLE kvmq_queues ADD COLUMN waiting INTEGER NOT NULL DEFAULT 0;
`;
const FLOW_INDEXES_12 = `
CREATE INDEX IF NOT EXISTS kvmq_messages_children ON kvmq_messages (parent_seq) WHERE parent_seq IS NOT NULL;
CREATE INDEX IF NOT EXISTS kvmq_messages_waiting ON kvmq_messages (queue, updated_at) WHERE phase = 4;
`;

const DDL = `
CREATE TABLE IF NOT EXISTS kvmq_messages (
  seq           INTEGER PRIMARY KEY,            -- arrival order, for FIFO among equals
  queue         TEXT    NOT NULL,
  id            TEXT    NOT NULL,
  payload       BLOB    NOT NULL,
  encoding      INTEGER NOT NULL,               -- 0 JSON, 1 bytes
  metadata      TEXT    NOT NULL,               -- JSON object
  filters       TEXT    NOT NULL,               -- the filter class, '' for none
  phase         INTEGER NOT NULL,               -- 0 pending, 1 locked, 2 done, 3 failed
  ready_at      INTEGER NOT NULL,               -- pending: claimable from then
  lock_until    INTEGER NOT NULL DEFAULT 0,     -- locked: held until then
  consumer      TEXT,                           -- locked: the holder
  backoff_until INTEGER NOT NULL DEFAULT 0,     -- done: refuses duplicates until then (0: no backoff)
  requeue       INTEGER NOT NULL DEFAULT 0,     -- locked: queue again when done; pending: a requeue waiting for its backoff
  next_payload  BLOB,                           -- the payload the requeued run carries, if replaced
  next_encoding INTEGER,
  attempt       INTEGER NOT NULL DEFAULT 0,
  outcome       TEXT,
  last_error    TEXT,
  enqueued_at   INTEGER NOT NULL,
  updated_at    INTEGER NOT NULL,               -- done/failed: the finish time
  policy        TEXT,                           -- the message's retry policy (model/policy.ts), NULL for none
  history       TEXT,                           -- JSON AttemptRecord[], NULL while empty
  losses        INTEGER NOT NULL DEFAULT 0,     -- locks that ended without a finish
  priority      INTEGER NOT NULL DEFAULT 0,     -- 0 (runs first) to 1000
  group_name    TEXT,                           -- at most the queue's groupConcurrency held at once; NULL: no group
  debounce_id   TEXT,                           -- a later enqueue with this id replaces the message while it waits
  result        BLOB,                           -- what the current run's success returned; NULL for none
  result_encoding INTEGER,                      -- 0 JSON, 1 bytes
  parent_seq    INTEGER,                        -- a flow's child: its parent's seq; NULL for none
  parent_wait   INTEGER NOT NULL DEFAULT 0,     -- 1 while the parent counts this child as not ended
  child_failure INTEGER NOT NULL DEFAULT 0,     -- what its final failure does to the parent (flows.ts)
  children_left INTEGER NOT NULL DEFAULT 0      -- a waiting parent: its children not ended
) STRICT;
CREATE UNIQUE INDEX IF NOT EXISTS kvmq_messages_by_id ON kvmq_messages (queue, id);
${INDEXES_4}
CREATE INDEX IF NOT EXISTS kvmq_messages_locked ON kvmq_messages (queue, lock_until) WHERE phase = 1;
CREATE INDEX IF NOT EXISTS kvmq_messages_done ON kvmq_messages (queue, updated_at) WHERE phase = 2;
${INDEXES_2}
-- Per-queue counters and the configuration (zkmq's conf/), kept in the store.
CREATE TABLE IF NOT EXISTS kvmq_queues (
  queue         TEXT    PRIMARY KEY,
  size          INTEGER NOT NULL DEFAULT 0,     -- pending + locked
  done          INTEGER NOT NULL DEFAULT 0,     -- phase 2
  failed        INTEGER NOT NULL DEFAULT 0,     -- phase 3
  dry_runs      INTEGER NOT NULL DEFAULT 0,
  eoq_until     INTEGER NOT NULL DEFAULT 0,     -- queue-wide end-of-queue backoff
  gc_at         INTEGER NOT NULL DEFAULT 0,
  gc_lock_until INTEGER NOT NULL DEFAULT 0,     -- one GC at a time per queue
  config        TEXT,                           -- JSON QueueConfig, NULL for defaults
  events_trimmed INTEGER NOT NULL DEFAULT 0,    -- the last event trimmed from this queue (seq.index), so readers
  events_trimmed_index INTEGER NOT NULL DEFAULT 0, -- behind it are told they missed events
  rate_tat      REAL    NOT NULL DEFAULT 0,     -- the rate limit's theoretical arrival time (model/rate-limit.ts)
  events_buffer TEXT    NOT NULL DEFAULT '',    -- the newest events, not yet in kvmq_events (event-text.ts)
  events_buffered INTEGER NOT NULL DEFAULT 0,   -- how many events events_buffer holds
  waiting       INTEGER NOT NULL DEFAULT 0      -- phase 4: flow parents waiting for their children
) STRICT, WITHOUT ROWID;
${TURNS_3}
${TABLES_5}
${eventsTable7('kvmq_events')}
${REPORTS_8}
${GROUP_RATES_10}
${EXPIRY_11}
${FLOW_INDEXES_12}
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

// Schema 1 → 2: policy, history and losses per message, done and failed counters per queue
// (computed once from the rows), and the indexes above.
const MIGRATE_1_TO_2 = `
ALTER TABLE kvmq_messages ADD COLUMN policy TEXT;
ALTER TABLE kvmq_messages ADD COLUMN history TEXT;
ALTER TABLE kvmq_messages ADD COLUMN losses INTEGER NOT NULL DEFAULT 0;
ALTER TABLE kvmq_queues ADD COLUMN done INTEGER NOT NULL DEFAULT 0;
ALTER TABLE kvmq_queues ADD COLUMN failed INTEGER NOT NULL DEFAULT 0;
${INDEXES_2}
INSERT INTO kvmq_queues (queue) SELECT DISTINCT queue FROM kvmq_messages WHERE true ON CONFLICT DO NOTHING;
UPDATE kvmq_queues SET
  size = (SELECT count(*) FROM kvmq_messages m WHERE m.queue = kvmq_queues.queue AND m.phase IN (0, 1)),
  done = (SELECT count(*) FROM kvmq_messages m WHERE m.queue = kvmq_queues.queue AND m.phase = 2);
`;

// Schema 2 → 3: the events and turns tables, and each queue's highest trimmed event.
const MIGRATE_2_TO_3 = `
ALTER TABLE kvmq_queues ADD COLUMN events_trimmed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE kvmq_queues ADD COLUMN events_trimmed_index INTEGER NOT NULL DEFAULT 0;
${TABLES_3}
`;

// Schema 3 → 4: priority, group and debounce id per message (existing ones: priority 0, none), the rate limit
// state per queue; the pending index gains the priority.
const MIGRATE_3_TO_4 = `
ALTER TABLE kvmq_messages ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE kvmq_messages ADD COLUMN group_name TEXT;
ALTER TABLE kvmq_messages ADD COLUMN debounce_id TEXT;
ALTER TABLE kvmq_queues ADD COLUMN rate_tat REAL NOT NULL DEFAULT 0;
DROP INDEX IF EXISTS kvmq_messages_ready;
${INDEXES_4}
`;

// Schema 4 → 5: the schedules table.
const MIGRATE_4_TO_5 = TABLES_5;

// Schema 5 → 6: the queue row's event buffer.
const MIGRATE_5_TO_6 = QUEUE_COLUMNS_6;

// Schema 6 → 7: lists are written in event-text.ts's text from now on, into eventsTable7's table. Old rows move
// there as they are, JSON (read by their first character); each buffer, JSON items that new events could not
// follow, becomes its queue's next row, timed as its newest event, so its cursors (the row it was read as) stay.
const MIGRATE_6_TO_7 = `
${eventsTable7('kvmq_events_7')}
INSERT INTO kvmq_events (queue, seq, at, count, events)
  SELECT q.queue,
    coalesce((SELECT e.seq + e.count FROM kvmq_events e WHERE e.queue = q.queue ORDER BY e.seq DESC LIMIT 1), 1),
    coalesce(json_extract('[' || q.events_buffer || ']', '$[#-1][4]'), 0), q.events_buffered,
    '[' || q.events_buffer || ']'
  FROM kvmq_queues q WHERE q.events_buffered > 0;
UPDATE kvmq_queues SET events_buffer = '', events_buffered = 0 WHERE events_buffered > 0;
INSERT INTO kvmq_events_7 (queue, seq, at, first, count, events)
  SELECT queue, seq, at, first, count, events FROM kvmq_events ORDER BY queue, seq;
DROP TABLE kvmq_events;
ALTER TABLE kvmq_events_7 RENAME TO kvmq_events;
`;

// Schema 7 → 8: the reports table.
const MIGRATE_7_TO_8 = REPORTS_8;

// Schema 9 → 10: the group rates table.
const MIGRATE_9_TO_10 = GROUP_RATES_10;
const MIGRATE_10_TO_11 = EXPIRY_11;
const MIGRATE_11_TO_12 = FLOWS_12 + FLOW_INDEXES_12;

// Schema 8 → 9: each message's result (existing ones: none).
const MIGRATE_8_TO_9 = `
ALTER TABLE kvmq_messages ADD COLUMN result BLOB;
ALTER TABLE kvmq_messages ADD COLUMN result_encoding INTEGER;
`;

// The steps from each schema to the next, in order: STEPS[n - 1] brings schema n to n + 1.
const STEPS: readonly string[] = [
  MIGRATE_1_TO_2,
  MIGRATE_2_TO_3,
  MIGRATE_3_TO_4,
  MIGRATE_4_TO_5,
  MIGRATE_5_TO_6,
  MIGRATE_6_TO_7,
  MIGRATE_7_TO_8,
  MIGRATE_8_TO_9,
  MIGRATE_9_TO_10,
  MIGRATE_10_TO_11,
  MIGRATE_11_TO_12,
];

/** The schema this kvmq writes: the one after the last step. */
export const SCHEMA_VERSION = STEPS.length + 1;

// What brings each older schema up to date, in one transaction: a new file gets the whole DDL.
const MIGRATIONS: Readonly<Record<number, string>> = Object.fromEntries([
  [0, DDL],
  ...STEPS.map((_, i) => [i + 1, STEPS.slice(i).join('')] as const),
]);

export function migrate(db: BetterSqlite3.Database, path: string): void {
  const check = (): number => {
    const version = db.pragma('user_version', { simple: true }) as number;
    if (version > SCHEMA_VERSION) {
      throw new StoreLayoutError(`${path} was written by a newer kvmq (schema ${version}); upgrade kvmq to use it`);
    }
    return version;
  };
  if (check() === SCHEMA_VERSION) return;
  db.transaction(() => {
    // Read again under the write lock: another process may have migrated the file meanwhile.
    const version = check();
    if (version === SCHEMA_VERSION) return;
    const steps = MIGRATIONS[version];
    if (steps === undefined) throw new StoreLayoutError(`${path} has an unknown kvmq schema ${version}`);
    db.exec(steps);
    db.pragma(`user_version = ${SCHEMA_VERSION}`);
  }).immediate();
}
