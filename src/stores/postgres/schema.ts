/**
 * The PostgreSQL layout, in a schema of its own (`?schema=`, default `kvmq`). One row per message, its
 * `phase` and times giving its state as on SQLite (sqlite/state.ts); partial indexes keep each hot query on a
 * small index: pending messages by (queue, filter class, priority, ready time, seq), the claim's order, so a
 * claim reads the head of one range per class whatever the backlog; locks by expiry and by holder; finished
 * and failed messages by age. Per-queue counters live in `counts`, one row per (queue, slot), a slot per
 * connection, so concurrent writers do not queue on one row and a count reads at most SLOTS rows. Events are
 * rows keyed by (queue, seq), the seq taken from the queue row in the writing transaction.
 *
 * Version 2 adds handlers' reports, version 3 the one-statement finish and claim, version 4 keeps a success's
 * result with the message (result, result_encoding; NULL for none), version 5 gives LIFO messages their place,
 * version 6 indexes waiting messages by the deadline of their time to live (expiry.ts), version 7 adds flows
 * (flows.ts): a child's parent and its debt to it, a waiting parent's count of children not ended. Version 8
 * changes no table: its finish_and_claim also records a dry run and says when to look again. Version 9 changes
 * no table either: its finish_and_claim removes a success of a queue that keeps none (keepDone 0), and it and
 * enqueue_messages keep generic plans (sql-text.ts GENERIC_PLANS). Version 10 changes no table: both claim
 * paths pick with pick_ready (one priority's ready range at a time, never a delayed message), then update by
 * primary key, so a claim stays on the indexes whatever the delayed backlog and the statistics say. Version 11
 * deletes a message's reports by one trigger per deleting statement instead of the foreign key's cascade, and
 * drops the index of holders (reports11): each claim writes one index entry fewer, each removal runs no query of
 * its own. Version 12 gives every text key column the `C` collation (keysInC12), so that index comparisons
 * are byte comparisons whatever the database's collation.
 *
 * The schema's version is the one row of `version`; kvmq creates and migrates it under a transaction-level
 * advisory lock keyed by the schema's name, so processes starting together migrate it once. The functions
 * (sql-functions.ts, sql-finish-claim.ts) are installed by the same migration, after every column they read.
 */
import { StoreLayoutError } from '../../model/errors.js';
import { finishClaimDdl } from './sql-finish-claim.js';
import { functionsDdl } from './sql-functions.js';
import type { Queryable } from './queryable.js';
import { quoteIdent } from './sql-text.js';

/** A message's time-to-live deadline, as the expiry index keys it (model/policy.ts expireAt). */
export const EXPIRE_AT_SQL = `((policy::jsonb ->> 'expireAt')::bigint)`;
/** The expiry index's predicate: waiting messages whose policy names a deadline. */
export const EXPIRING_SQL = `phase = 0 AND policy LIKE '%"expireAt":%'`;

/** The messages table and its indexes, as version 1 made them (later versions alter them). */
const messagesTable = (s: string): string => `
CREATE TABLE ${s}.messages (
  seq           bigint   GENERATED ALWAYS AS IDENTITY PRIMARY KEY, -- arrival order, for FIFO among equals
  queue         text     NOT NULL,
  id            text     NOT NULL,
  payload       bytea    NOT NULL,
  encoding      smallint NOT NULL,             -- 0 JSON, 1 bytes
  metadata      text     NOT NULL,             -- JSON object
  filters       text     NOT NULL,             -- the filter class, '' for none
  phase         smallint NOT NULL,             -- 0 pending, 1 locked, 2 done, 3 failed
  ready_at      bigint   NOT NULL,             -- pending: claimable from then (ms since the epoch)
  lock_until    bigint   NOT NULL DEFAULT 0,   -- locked: held until then
  consumer      text,                          -- locked: the holder
  backoff_until bigint   NOT NULL DEFAULT 0,   -- done: refuses duplicates until then (0: no backoff)
  requeue       smallint NOT NULL DEFAULT 0,   -- locked: queue again when done; pending: a requeue in its backoff
  next_payload  bytea,                         -- the payload the requeued run carries, if replaced
  next_encoding smallint,
  attempt       integer  NOT NULL DEFAULT 0,
  outcome       text,
  last_error    text,
  enqueued_at   bigint   NOT NULL,
  updated_at    bigint   NOT NULL,             -- done/failed: the finish time
  policy        text,                          -- the message's retry policy (model/policy.ts), NULL for none
  history       text,                          -- JSON AttemptRecord[], NULL while empty
  losses        integer  NOT NULL DEFAULT 0,   -- locks that ended without a finish
  priority      integer  NOT NULL DEFAULT 0,   -- 0 (runs first) to 1000
  group_name    text,                          -- at most the queue's groupConcurrency held at once
  debounce_id   text,                          -- a later enqueue with this id replaces the message while it waits
  result        bytea,                         -- what the current run's success returned; NULL for none
  result_encoding smallint                     -- 0 JSON, 1 bytes
);
CREATE UNIQUE INDEX messages_by_id ON ${s}.messages (queue, id);
CREATE INDEX messages_pending ON ${s}.messages (queue, filters, priority, ready_at, seq) WHERE phase = 0;
CREATE INDEX messages_locked ON ${s}.messages (queue, lock_until) WHERE phase = 1;
CREATE INDEX messages_holder ON ${s}.messages (queue, consumer) WHERE phase = 1;
CREATE INDEX messages_group_held ON ${s}.messages (queue, group_name, lock_until)
  WHERE phase = 1 AND group_name IS NOT NULL;
CREATE INDEX messages_done ON ${s}.messages (queue, updated_at, seq) WHERE phase = 2;
CREATE INDEX messages_backoff ON ${s}.messages (queue, backoff_until, seq) WHERE phase = 2 AND backoff_until > 0;
CREATE INDEX messages_failed ON ${s}.messages (queue, updated_at, seq) WHERE phase = 3;
CREATE INDEX messages_debounce ON ${s}.messages (queue, debounce_id, seq) WHERE phase = 0 AND debounce_id IS NOT NULL;
`;

/** What a queue shares besides its messages: its row, counters, classes, consumers, events, turns, schedules. */
const queueTables = (s: string): string => `
-- One row per queue: the configuration and what claims and GC share.
CREATE TABLE ${s}.queues (
  queue          text   PRIMARY KEY,
  config         text,                         -- JSON QueueConfig, NULL for defaults
  dry_runs       bigint NOT NULL DEFAULT 0,
  eoq_until      bigint NOT NULL DEFAULT 0,    -- queue-wide end-of-queue backoff
  rate_tat       double precision NOT NULL DEFAULT 0, -- the rate limit's theoretical arrival time
  gc_at          bigint NOT NULL DEFAULT 0,
  gc_lock_until  bigint NOT NULL DEFAULT 0,    -- one GC at a time per queue
  events_seq     bigint NOT NULL DEFAULT 0,    -- the queue's last event number
  events_trimmed bigint NOT NULL DEFAULT 0     -- the last event trimmed: a reader behind it missed events
);

-- Per-queue counters: pending + locked (size), done, failed; summed over the slots.
CREATE TABLE ${s}.counts (
  queue  text     NOT NULL,
  slot   smallint NOT NULL,
  size   bigint   NOT NULL DEFAULT 0,
  done   bigint   NOT NULL DEFAULT 0,
  failed bigint   NOT NULL DEFAULT 0,
  PRIMARY KEY (queue, slot)
);

-- Filter classes seen per queue, so a claim reads only classes a worker accepts.
CREATE TABLE ${s}.classes (
  queue   text NOT NULL,
  filters text NOT NULL,
  PRIMARY KEY (queue, filters)
);

CREATE TABLE ${s}.consumers (
  queue      text    NOT NULL,
  id         text    NOT NULL,
  host       text    NOT NULL,
  pid        integer NOT NULL,
  started_at bigint  NOT NULL,
  seen_at    bigint  NOT NULL,
  expires_at bigint  NOT NULL,
  lock_key   integer NOT NULL,                 -- the session advisory lock its process holds while it lives
  PRIMARY KEY (queue, id)
);

CREATE TABLE ${s}.events (
  queue   text     NOT NULL,
  seq     bigint   NOT NULL,                   -- the queue's event number: the cursor
  at      bigint   NOT NULL,
  type    smallint NOT NULL,                   -- index in QUEUE_EVENT_TYPES
  id      text     NOT NULL,
  attempt integer  NOT NULL,
  error   text,
  PRIMARY KEY (queue, seq)
);

CREATE TABLE ${s}.turns (
  queue    text   NOT NULL,
  name     text   NOT NULL,
  taken_at bigint NOT NULL,
  PRIMARY KEY (queue, name)
);

CREATE TABLE ${s}.schedules (
  queue   text   NOT NULL,
  name    text   NOT NULL,
  body    text   NOT NULL,
  next_at bigint NOT NULL,
  PRIMARY KEY (queue, name)
);

CREATE TABLE ${s}.version (version integer NOT NULL);
`;

// Version 1 → 2: handlers' reports (reports.ts), a row per message that reported, deleted with it.
const reports2 = (schema: string): string => `
CREATE TABLE IF NOT EXISTS ${quoteIdent(schema)}.reports (
  seq      bigint  PRIMARY KEY REFERENCES ${quoteIdent(schema)}.messages (seq) ON DELETE CASCADE, -- the message's seq
  progress text,                               -- the latest progress, JSON; NULL for none
  log      text,                               -- JSON list of the kept lines, oldest first; NULL for none
  dropped  integer NOT NULL DEFAULT 0          -- older lines dropped to keep the log bounded
);
`;

/** A version that changed functions only: every migration installs them last (installFunctions). */
const functionsOnly = (): string => '';

/** The steps from each schema to the next, in order: STEPS[n - 1] brings schema n to n + 1. */
const STEPS: readonly ((schema: string) => string)[] = [
  reports2,
  functionsOnly, // 3: the one-statement finish and claim
  resultColumns4,
  groupRates5,
  expiryIndex6,
  flows7,
  functionsOnly, // 8: dry runs recorded by finish_and_claim
  functionsOnly, // 9: successes of keepDone 0 removed at their finish; generic plans
  functionsOnly, // 10: claims pick with pick_ready
  reports11,
  keysInC12,
];

/** The schema this kvmq writes: the one after the last step. */
export const SCHEMA_VERSION = STEPS.length + 1;

/**
 * What brings a schema at `version` up to date, in the one transaction of migrate(): a new schema is created with
 * the tables of version 1 (and the result columns of version 4, which that step then finds there), then takes
 * every step.
 */
function migration(schema: string, version: number): string {
  const s = quoteIdent(schema);
  const created =
    version === 0
      ? `CREATE SCHEMA IF NOT EXISTS ${s};
      ${messagesTable(s)}
      ${queueTables(s)}
      INSERT INTO ${s}.version (version) VALUES (0);`
      : '';
  return [created, ...STEPS.slice(Math.max(version, 1) - 1).map((step) => step(schema))].join('\n');
}

/**
 * The functions as this kvmq writes them (sql-functions.ts, sql-finish-claim.ts), replacing those an older
 * version installed: the last step of every migration.
 */
function installFunctions(schema: string): string {
  return `${functionsDdl(schema)}
    ${finishClaimDdl(schema)}`;
}

/** The text columns kvmq's indexes and joins compare, by table. */
const TEXT_KEYS: Readonly<Record<string, readonly string[]>> = {
  messages: ['queue', 'id', 'filters', 'consumer', 'group_name', 'debounce_id'],
  queues: ['queue'],
  counts: ['queue'],
  classes: ['queue', 'filters'],
  consumers: ['queue', 'id'],
  events: ['queue', 'id'],
  turns: ['queue', 'name'],
  schedules: ['queue', 'name'],
  group_rates: ['queue', 'group_name'],
};

/**
 * Schema 12. Every text key column takes the `C` collation. kvmq's keys are compared for equality and ordered by
 * byte (its listings already say COLLATE "C"); in a database of another collation each comparison of an index
 * insert or scan called the locale's strcoll: on an en_US.UTF-8 database PostgreSQL spent a fifth more CPU on a
 * processed message. All tables at once, since a join of two columns of different collations is refused. The
 * table is not rewritten (the type stays text); the indexes on these columns are rebuilt.
 */
function keysInC12(schema: string): string {
  const s = quoteIdent(schema);
  return Object.entries(TEXT_KEYS)
    .map(
      ([table, columns]) =>
        `ALTER TABLE ${s}.${table} ${columns.map((c) => `ALTER COLUMN ${c} TYPE text COLLATE "C"`).join(', ')};`,
    )
    .join('\n    ');
}

/**
 * Schema 11. A message's reports are deleted with it by a trigger that runs once per deleting statement, reading
 * the deleted rows as a transition table: the foreign key's cascade ran a query per deleted row, a tenth of a
 * worker's time in PostgreSQL when its queue keeps no successes. A report is written only under its message's
 * row lock (reports.ts), so none outlives its message. The holders' index goes: a consumer's held messages are
 * found among the queue's locked ones (messages_locked), a set as small as what its workers hold, and a claim
 * writes one index entry fewer.
 */
function reports11(schema: string): string {
  const s = quoteIdent(schema);
  return `ALTER TABLE ${s}.reports DROP CONSTRAINT IF EXISTS reports_seq_fkey;
    DROP INDEX IF EXISTS ${s}.messages_holder;
    CREATE OR REPLACE FUNCTION ${s}.reports_gone() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      DELETE FROM ${s}.reports r USING gone g WHERE r.seq = g.seq;
      RETURN NULL;
    END
    $fn$;
    DROP TRIGGER IF EXISTS messages_gone ON ${s}.messages;
    CREATE TRIGGER messages_gone AFTER DELETE ON ${s}.messages REFERENCING OLD TABLE AS gone
      FOR EACH STATEMENT EXECUTE FUNCTION ${s}.reports_gone();`;
}

/**
 * Schema 7: flows (flows.ts). A child names its parent by seq (kept when it moves to a dead-letter queue) and owes
 * it one count while parent_wait is 1; a parent in phase 4 (`waiting-children`) counts its children not ended in
 * children_left. Plain messages keep the defaults (NULL, 0), so their finishes never look further. Its functions
 * know them: state_of knows phase 4, and finish_and_claim leaves a flow's child to the general finish.
 */
function flows7(schema: string): string {
  const s = quoteIdent(schema);
  return `ALTER TABLE ${s}.messages ADD COLUMN IF NOT EXISTS parent_seq bigint,
      ADD COLUMN IF NOT EXISTS parent_wait smallint NOT NULL DEFAULT 0,
      ADD COLUMN IF NOT EXISTS child_failure smallint NOT NULL DEFAULT 0,
      ADD COLUMN IF NOT EXISTS children_left integer NOT NULL DEFAULT 0;
    CREATE INDEX IF NOT EXISTS messages_children ON ${s}.messages (parent_seq) WHERE parent_seq IS NOT NULL;
    CREATE INDEX IF NOT EXISTS messages_waiting ON ${s}.messages (queue, updated_at, seq) WHERE phase = 4;`;
}

/** Schema 5: per (queue, group), when the group's next message may start under groupRateLimit. */
function groupRates5(schema: string): string {
  return `CREATE TABLE IF NOT EXISTS ${quoteIdent(schema)}.group_rates (
    queue      text             NOT NULL,
    group_name text             NOT NULL,
    tat        double precision NOT NULL,
    PRIMARY KEY (queue, group_name)
  );`;
}

/**
 * Schema 6: waiting messages with a time to live, by its deadline (the policy's expireAt), for the GC's sweep
 * (expiry.ts repeats the predicate and the expression, so the planner uses it). A message without one costs its
 * insert only the predicate: its policy is NULL or names no deadline.
 */
function expiryIndex6(schema: string): string {
  return `CREATE INDEX IF NOT EXISTS messages_expiry ON ${quoteIdent(schema)}.messages
    (queue, ${EXPIRE_AT_SQL}) WHERE ${EXPIRING_SQL};`;
}

/** Schema 4: each message's result (existing ones: none); enqueue_messages clears it when it revives or requeues. */
function resultColumns4(schema: string): string {
  return `ALTER TABLE ${quoteIdent(schema)}.messages ADD COLUMN IF NOT EXISTS result bytea,
    ADD COLUMN IF NOT EXISTS result_encoding smallint;`;
}

/**
 * On a read-only standby (a replica the dashboard reads from, say) nothing can be created or migrated: the
 * schema must be there, at SCHEMA_VERSION, as the primary's kvmq left it.
 */
export async function checkSchema(db: Queryable, schema: string): Promise<void> {
  const s = quoteIdent(schema);
  const exists = await db.query<{ found: boolean }>('SELECT to_regclass($1) IS NOT NULL AS found', [`${s}.version`]);
  if (exists.rows[0]?.found !== true) {
    throw new StoreLayoutError(
      `PostgreSQL schema ${schema} does not exist on this read-only standby; open the primary with kvmq once first`,
    );
  }
  const version = (await db.query<{ version: number }>(`SELECT version FROM ${s}.version LIMIT 1`)).rows[0]?.version;
  if (version !== SCHEMA_VERSION) {
    throw new StoreLayoutError(
      `PostgreSQL schema ${schema} on this read-only standby is at kvmq schema ${String(version)}, this kvmq ` +
        `reads ${SCHEMA_VERSION}; ${(version ?? 0) < SCHEMA_VERSION ? 'open the primary with this kvmq once to migrate it' : 'upgrade kvmq'}`,
    );
  }
}

/**
 * Creates the schema or brings it to SCHEMA_VERSION, in one transaction under an advisory lock of the
 * schema's name; a schema a newer kvmq wrote is refused.
 */
export async function migrate(db: Queryable, schema: string): Promise<void> {
  const s = quoteIdent(schema);
  await db.query('BEGIN');
  try {
    await db.query("SELECT pg_advisory_xact_lock(hashtext('kvmq migrate ' || $1))", [schema]);
    const exists = await db.query<{ found: boolean }>('SELECT to_regclass($1) IS NOT NULL AS found', [`${s}.version`]);
    const found = exists.rows[0]?.found === true;
    const version = found
      ? ((await db.query<{ version: number }>(`SELECT version FROM ${s}.version LIMIT 1`)).rows[0]?.version ?? 0)
      : 0;
    if (version > SCHEMA_VERSION) {
      throw new StoreLayoutError(
        `PostgreSQL schema ${schema} was written by a newer kvmq (schema ${version}); upgrade kvmq to use it`,
      );
    }
    if (version < SCHEMA_VERSION) {
      const tablesFound = await db.query('SELECT 1 FROM pg_tables WHERE schemaname = $1 LIMIT 1', [schema]);
      if (version === 0 && tablesFound.rows.length > 0) {
        throw new StoreLayoutError(`PostgreSQL schema ${schema} holds tables kvmq did not make; pick another ?schema=`);
      }
      if (!Number.isInteger(version) || version < 0)
        throw new StoreLayoutError(`PostgreSQL schema ${schema} has an unknown kvmq schema ${version}`);
      await db.query(migration(schema, version));
      await db.query(installFunctions(schema));
      await db.query(`UPDATE ${s}.version SET version = ${SCHEMA_VERSION}`);
    }
    await db.query('COMMIT');
  } catch (error) {
    await db.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}
