/** Every SQL statement the store runs, prepared once per connection. */
import type BetterSqlite3 from 'better-sqlite3';

export type Statement = BetterSqlite3.Statement;

const MESSAGE_FIELDS = 'seq, id, payload, encoding, metadata, filters, attempt, ready_at, lock_until, requeue, policy';

/** The columns a message's status is made of, and those of its content. */
export const STATUS_FIELDS =
  'seq, id, phase, ready_at, lock_until, backoff_until, requeue, attempt, outcome, last_error, consumer, enqueued_at, updated_at';
export const CONTENT_FIELDS = 'payload, encoding, metadata, filters, result, result_encoding';

export const SQL = {
  ensureQueue: 'INSERT INTO kvmq_queues (queue) VALUES (?) ON CONFLICT DO NOTHING',
  queueRow: `SELECT size, done, failed, dry_runs, eoq_until, gc_at, gc_lock_until, config, rate_tat, waiting FROM kvmq_queues
       WHERE queue = ?`,
  // The per-queue counters, changed in the transaction that changes the rows.
  addCounts:
    'UPDATE kvmq_queues SET size = size + @size, done = done + @done, failed = failed + @failed WHERE queue = @queue',
  setDryRuns: 'UPDATE kvmq_queues SET dry_runs = ?, eoq_until = ? WHERE queue = ?',
  resetDryRuns: 'UPDATE kvmq_queues SET dry_runs = 0, eoq_until = 0 WHERE queue = ? AND dry_runs <> 0',
  setConfig: 'UPDATE kvmq_queues SET config = ? WHERE queue = ?',
  clearQueue: `UPDATE kvmq_queues SET size = 0, done = 0, failed = 0, dry_runs = 0, eoq_until = 0, rate_tat = 0, waiting = 0
       WHERE queue = ?`,
  setRateTat: 'UPDATE kvmq_queues SET rate_tat = ? WHERE queue = ?',

  addClass: 'INSERT INTO kvmq_classes (queue, filters) VALUES (?, ?) ON CONFLICT DO NOTHING',
  classes: 'SELECT filters FROM kvmq_classes WHERE queue = ?',
  clearClasses: 'DELETE FROM kvmq_classes WHERE queue = ?',

  existing: `SELECT seq, phase, ready_at, lock_until, backoff_until, requeue, attempt, parent_seq, parent_wait
       FROM kvmq_messages WHERE queue = ? AND id = ?`,
  // A revive keeps the history and takes the new message's content, policy and scheduling.
  revive: `UPDATE kvmq_messages SET payload = @payload, encoding = @encoding, metadata = @metadata, filters = @filters,
         phase = 0, ready_at = @readyAt, lock_until = 0, consumer = NULL, backoff_until = 0, requeue = 0,
         next_payload = NULL, next_encoding = NULL, attempt = 0, outcome = NULL, last_error = NULL,
         result = NULL, result_encoding = NULL,
         enqueued_at = @now, updated_at = @now, policy = @policy, losses = 0,
         priority = @priority, group_name = @group, debounce_id = @debounceId
       WHERE seq = @seq`,
  // The pending messages of a debounce id, oldest first (the caller keeps the first still waiting).
  debounceWaiting: `SELECT seq, id, phase, ready_at, lock_until, backoff_until, requeue FROM kvmq_messages
       WHERE queue = ? AND debounce_id = ? AND phase = 0 ORDER BY seq`,
  // A debounced enqueue: the waiting message takes the new content and ready time; id, filters, priority, group,
  // policy and attempt stay.
  debounce: `UPDATE kvmq_messages SET payload = @payload, encoding = @encoding, metadata = @metadata,
         ready_at = @readyAt, requeue = 0, updated_at = @now
       WHERE seq = @seq`,
  // An update of a waiting message: each column given (not null) replaces its own; a new ready time ends a
  // requeue's wait as a new delay, not the done message's backoff (state.ts).
  update: `UPDATE kvmq_messages SET payload = coalesce(@payload, payload), encoding = coalesce(@encoding, encoding),
         priority = coalesce(@priority, priority), ready_at = coalesce(@readyAt, ready_at),
         requeue = CASE WHEN @readyAt IS NULL THEN requeue ELSE 0 END, filters = coalesce(@filters, filters)
       WHERE seq = @seq`,
  requeueDone: `UPDATE kvmq_messages SET phase = 0, ready_at = backoff_until, requeue = 1, attempt = 0, losses = 0,
         result = NULL, result_encoding = NULL, payload = coalesce(@payload, payload), encoding = coalesce(@encoding, encoding), updated_at = @now
       WHERE seq = @seq`,
  requeueLocked: `UPDATE kvmq_messages SET requeue = 1, next_payload = @payload, next_encoding = @encoding, updated_at = @now
       WHERE seq = @seq`,

  // Locks the oldest ready messages of one filter class and priority and returns them (in no set order).
  lockReady: `UPDATE kvmq_messages SET phase = 1, lock_until = @lockUntil, consumer = @consumer,
         attempt = attempt + 1, requeue = 0, updated_at = @now
       WHERE seq IN (SELECT seq FROM kvmq_messages
         WHERE queue = @queue AND filters = @filters AND phase = 0 AND priority = @priority AND ready_at <= @now
         ORDER BY ready_at, seq LIMIT @limit)
       RETURNING ${MESSAGE_FIELDS}`,
  // The next priority after `priority` with pending messages in a class: one index seek.
  nextPriority: `SELECT priority FROM kvmq_messages WHERE queue = ? AND filters = ? AND phase = 0 AND priority > ?
       ORDER BY priority LIMIT 1`,
  nextReady: `SELECT ready_at FROM kvmq_messages
       WHERE queue = ? AND filters = ? AND phase = 0 AND priority = ? AND ready_at > ?
       ORDER BY ready_at LIMIT 1`,
  // With group concurrency: ready messages of a class and priority after (t, seq), oldest first, except those of
  // groups already full (a JSON list).
  readyCandidates: `SELECT seq, ready_at, group_name FROM kvmq_messages
       WHERE queue = @queue AND filters = @filters AND phase = 0 AND priority = @priority AND ready_at <= @now
         AND (ready_at, seq) > (@t, @seq)
         AND (group_name IS NULL OR group_name NOT IN (SELECT value FROM json_each(@full)))
       ORDER BY ready_at, seq LIMIT @limit`,
  // Locks the messages chosen by seq (a JSON list) and returns them (in no set order).
  lockChosen: `UPDATE kvmq_messages SET phase = 1, lock_until = @lockUntil, consumer = @consumer,
         attempt = attempt + 1, requeue = 0, updated_at = @now
       WHERE seq IN (SELECT value FROM json_each(@seqs))
       RETURNING ${MESSAGE_FIELDS}`,
  // Messages held per group (unexpired locks).
  heldGroups: `SELECT group_name, count(*) AS n FROM kvmq_messages
       WHERE queue = ? AND phase = 1 AND group_name IS NOT NULL AND lock_until > ? GROUP BY group_name`,
  expiredLocks: `SELECT ${MESSAGE_FIELDS}, consumer, losses, history, group_name, parent_wait FROM kvmq_messages
       WHERE queue = ? AND phase = 1 AND lock_until <= ? ORDER BY lock_until LIMIT ?`,
  nextLockExpiry:
    'SELECT lock_until FROM kvmq_messages WHERE queue = ? AND phase = 1 AND lock_until > ? ORDER BY lock_until LIMIT 1',
  // Takes over a message whose lock expired (a lost delivery); it keeps its requeue mark.
  relock: `UPDATE kvmq_messages SET lock_until = @lockUntil, consumer = @consumer, attempt = attempt + 1, updated_at = @now,
         losses = @losses, history = @history
       WHERE seq = @seq
       RETURNING ${MESSAGE_FIELDS}`,
  // Puts back a message lockReady took beyond what the claim wanted.
  unlock: 'UPDATE kvmq_messages SET phase = 0, lock_until = 0, consumer = NULL, attempt = attempt - 1 WHERE seq = ?',
  extend: `UPDATE kvmq_messages SET lock_until = @lockUntil
       WHERE queue = @queue AND id = @id AND phase = 1 AND consumer = @consumer AND attempt = @attempt`,

  held: `SELECT seq, id, phase, consumer, attempt, requeue, filters, history, parent_wait FROM kvmq_messages
       WHERE queue = ? AND id = ?`,
  cancelRow: `SELECT seq, id, phase, ready_at, lock_until, backoff_until, requeue, consumer, attempt, filters, history,
         parent_wait
       FROM kvmq_messages WHERE queue = ? AND id = ?`,
  toDone: `UPDATE kvmq_messages SET phase = 2, lock_until = 0, consumer = NULL, backoff_until = @backoffUntil,
         outcome = @outcome, last_error = @error, updated_at = @now, result = @result, result_encoding = @resultEncoding
       WHERE seq = @seq`,
  toPending: `UPDATE kvmq_messages SET phase = 0, ready_at = @readyAt, lock_until = 0, consumer = NULL, requeue = @requeue,
         attempt = CASE WHEN @resetAttempt THEN 0 ELSE attempt END, losses = CASE WHEN @resetAttempt THEN 0 ELSE losses END,
         history = coalesce(@history, history),
         payload = coalesce(next_payload, payload), encoding = coalesce(next_encoding, encoding),
         next_payload = NULL, next_encoding = NULL, outcome = @outcome, last_error = @error, updated_at = @now,
         result = NULL, result_encoding = NULL
       WHERE seq = @seq`,

  // A message that fails: kept apart from successes, its backoff ignored.
  toFailed: `UPDATE kvmq_messages SET phase = 3, lock_until = 0, consumer = NULL, backoff_until = 0, requeue = 0,
         next_payload = NULL, next_encoding = NULL, outcome = 'error', last_error = @error,
         history = coalesce(@history, history), updated_at = @now
       WHERE seq = @seq`,
  // A message that fails moves to the dead-letter queue instead: queued there now, at attempt 0.
  // It leaves its debounce id behind: enqueues to the dead-letter queue never replace it; and a flow's child
  // has ended for its parent (flows.ts), which its run there no longer concerns.
  deadLetter: `UPDATE kvmq_messages SET queue = @dlq, phase = 0, ready_at = @now, lock_until = 0, consumer = NULL,
         backoff_until = 0, requeue = 0, next_payload = NULL, next_encoding = NULL, attempt = 0, losses = 0,
         debounce_id = NULL, parent_wait = 0,
         outcome = 'error', last_error = @error, history = coalesce(@history, history), updated_at = @now
       WHERE seq = @seq`,

  // Actions. A retried message is queued now at attempt 0; its outcome, error and history stay.
  retry: `UPDATE kvmq_messages SET phase = 0, ready_at = @now, attempt = 0, losses = 0, requeue = 0, backoff_until = 0,
         updated_at = @now
       WHERE seq = @seq`,
  retryFailed: `UPDATE kvmq_messages SET phase = 0, ready_at = @now, attempt = 0, losses = 0, requeue = 0,
         backoff_until = 0, updated_at = @now
       WHERE seq IN (SELECT seq FROM kvmq_messages WHERE queue = @queue AND phase = 3 ORDER BY updated_at, seq LIMIT @limit)
       RETURNING id, seq, parent_seq, parent_wait`,
  promote: 'UPDATE kvmq_messages SET ready_at = @now, requeue = 0, updated_at = @now WHERE seq = @seq',
  remove: 'DELETE FROM kvmq_messages WHERE seq = ?',

  status: `SELECT ${STATUS_FIELDS}, result, result_encoding FROM kvmq_messages WHERE queue = ? AND id = ?`,
  details: `SELECT ${STATUS_FIELDS}, ${CONTENT_FIELDS}, policy, history, priority, group_name FROM kvmq_messages
       WHERE queue = ? AND id = ?`,
  // Counts split by time walk only rows in time-limited states: every lock, pending backoffs, duplicate backoffs.
  lockCounts: `SELECT lock_until > @now AS held, requeue, count(*) AS n FROM kvmq_messages
       WHERE queue = @queue AND phase = 1 GROUP BY 1, 2`,
  backoffCounts: `SELECT requeue, count(*) AS n FROM kvmq_messages
       WHERE queue = @queue AND phase = 0 AND filters = @filters AND priority = @priority AND ready_at > @now
       GROUP BY 1`,
  doneBackoffCount: `SELECT count(*) FROM kvmq_messages
       WHERE queue = @queue AND phase = 2 AND backoff_until > 0 AND backoff_until > @now`,
  holding: `SELECT id FROM kvmq_messages WHERE queue = ? AND phase = 1 AND lock_until > ? AND consumer = ?`,
  clearMessages: 'DELETE FROM kvmq_messages WHERE queue = ?',
  // A queue's messages that owe a flow's parent a count, which a clear ends as removals (flows.ts).
  owingChildren: 'SELECT seq FROM kvmq_messages WHERE queue = ? AND parent_wait = 1 ORDER BY seq',

  takeGcLock: `UPDATE kvmq_queues SET gc_lock_until = @lockUntil, gc_at = @now
       WHERE queue = @queue AND gc_lock_until <= @now AND (@force OR gc_at + @interval <= @now)`,
  releaseGcLock: 'UPDATE kvmq_queues SET gc_lock_until = 0 WHERE queue = ?',
  // Waiting messages never handed out (attempt 0) past their time to live, on the expiry index (schema.ts EXPIRY_10: the same expression).
  expiredWaiting: `SELECT seq, id, filters, attempt, parent_wait FROM kvmq_messages
       WHERE queue = @queue AND phase = 0 AND json_extract(policy, '$.expireAt') IS NOT NULL
         AND json_extract(policy, '$.expireAt') <= @now AND attempt = 0
       LIMIT @limit`,
  gcBatch: `DELETE FROM kvmq_messages WHERE seq IN (
         SELECT seq FROM kvmq_messages
         WHERE queue = @queue AND phase = 2 AND updated_at <= @before AND backoff_until <= @now LIMIT @limit)`,
  gcFailedBatch: `DELETE FROM kvmq_messages WHERE seq IN (
         SELECT seq FROM kvmq_messages WHERE queue = @queue AND phase = 3 AND updated_at <= @before LIMIT @limit)`,
  // Retention by count (keepDone, keepFailed): those finished before the newest @keep, in finish order.
  gcDoneBeyond: `DELETE FROM kvmq_messages WHERE seq IN (
         SELECT seq FROM (SELECT seq, backoff_until FROM kvmq_messages WHERE queue = @queue AND phase = 2
           ORDER BY updated_at DESC, seq DESC LIMIT -1 OFFSET @keep)
         WHERE backoff_until <= @now LIMIT @limit)`,
  gcFailedBeyond: `DELETE FROM kvmq_messages WHERE seq IN (
         SELECT seq FROM kvmq_messages WHERE queue = @queue AND phase = 3
         ORDER BY updated_at DESC, seq DESC LIMIT @limit OFFSET @keep)`,

  upsertConsumer: `INSERT INTO kvmq_consumers (queue, id, host, pid, started_at, seen_at, expires_at)
       VALUES (@queue, @id, @host, @pid, @now, @now, @expiresAt)
       ON CONFLICT (queue, id) DO UPDATE SET seen_at = excluded.seen_at, expires_at = excluded.expires_at`,
  deleteConsumer: 'DELETE FROM kvmq_consumers WHERE queue = ? AND id = ?',
  liveConsumers:
    'SELECT id, host, pid, started_at, seen_at FROM kvmq_consumers WHERE queue = ? AND expires_at > ? ORDER BY started_at',
  lapsedConsumers: 'DELETE FROM kvmq_consumers WHERE queue = ? AND expires_at <= ?',

  // Queues with a configuration or messages (a row alone is made by any write, e.g. a worker's registration).
  queues: `SELECT queue FROM kvmq_queues
       WHERE config IS NOT NULL OR size > 0 OR done > 0 OR failed > 0 OR waiting > 0 ORDER BY queue`,
  // A group's groupRateLimit state (group-rates.ts).
  groupRateTat: 'SELECT tat FROM kvmq_group_rates WHERE queue = ? AND group_name = ?',
  setGroupRateTat: `INSERT INTO kvmq_group_rates (queue, group_name, tat) VALUES (?, ?, ?)
       ON CONFLICT (queue, group_name) DO UPDATE SET tat = excluded.tat`,
  // GC: a group whose next start has come is as one never charged (no row), so its row goes.
  pastGroupRates: 'DELETE FROM kvmq_group_rates WHERE queue = ? AND tat <= ?',
  // The newest seq so far: LIFO messages sort by its negation, below every ready time (enqueue.ts).
  lastSeq: 'SELECT coalesce(max(seq), 0) FROM kvmq_messages',
  // The turn is taken when it was never taken, or its window ended; no change means another has it.
  takeTurn: `INSERT INTO kvmq_turns (queue, name, taken_at) VALUES (@queue, @name, @now)
       ON CONFLICT (queue, name) DO UPDATE SET taken_at = excluded.taken_at
       WHERE kvmq_turns.taken_at + @everyMs <= excluded.taken_at OR kvmq_turns.taken_at > excluded.taken_at`,

  // Flows (flows.ts). A flow's message, parents first: its parent's seq, whether it waits (phase 4) and for how many.
  flowInsert: `INSERT INTO kvmq_messages (queue, id, payload, encoding, metadata, filters, phase, ready_at, enqueued_at,
         updated_at, policy, priority, group_name, parent_seq, parent_wait, child_failure, children_left)
       VALUES (@queue, @id, @payload, @encoding, @metadata, @filters, @phase, @readyAt, @now, @now, @policy, @priority,
         @group, @parentSeq, @parentWait, @childFailure, @childrenLeft)
       ON CONFLICT (queue, id) DO NOTHING RETURNING seq`,
  // A message enqueued before the flow, linked as a node's child (dependsOn); it owes a count unless it ended.
  linkChild: `UPDATE kvmq_messages SET parent_seq = @parentSeq, parent_wait = @parentWait, child_failure = @childFailure
       WHERE seq = @seq`,
  // A child that ended: its parent and policy; parent_wait goes to 0 so it is counted once.
  childEnds: `UPDATE kvmq_messages SET parent_wait = 0 WHERE seq = ? AND parent_wait = 1
       RETURNING parent_seq, child_failure, queue, id`,
  // A retried child whose parent still waits owes it a count again.
  childWaitsAgain: 'UPDATE kvmq_messages SET parent_wait = 1 WHERE seq = ?',
  flowParent: `SELECT seq, queue, id, phase, children_left, attempt, filters, parent_wait, ready_at FROM kvmq_messages
       WHERE seq = ?`,
  addChildrenLeft: 'UPDATE kvmq_messages SET children_left = children_left + @delta WHERE seq = @seq',
  releaseParent: 'UPDATE kvmq_messages SET phase = 0, children_left = 0, updated_at = @now WHERE seq = @seq',
  failParent: `UPDATE kvmq_messages SET phase = 3, children_left = 0, outcome = 'error', last_error = @error,
         updated_at = @now
       WHERE seq = @seq`,
  // A parent's children that have not started (pending or waiting themselves), for a cancel or `remove`.
  waitingChildren: `SELECT seq, queue, id, phase, attempt, filters, history, parent_wait FROM kvmq_messages
       WHERE parent_seq = ? AND parent_wait = 1 AND phase IN (0, 4)`,
  addFlowCounts:
    'UPDATE kvmq_queues SET size = size + @size, waiting = waiting + @waiting, failed = failed + @failed WHERE queue = @queue',
  // A flow's tree: a node by id or seq, and a node's children in the order they were written.
  flowNodeOf: 'SELECT seq, parent_seq FROM kvmq_messages WHERE queue = ? AND id = ?',
  flowUp: 'SELECT parent_seq FROM kvmq_messages WHERE seq = ?',
  flowNode: `SELECT ${STATUS_FIELDS}, result, result_encoding, queue FROM kvmq_messages WHERE seq = ?`,
  flowChildren: `SELECT ${STATUS_FIELDS}, result, result_encoding, queue FROM kvmq_messages
       WHERE parent_seq = ? ORDER BY seq`,
} as const;

// Statements that return the first column's value instead of a row object.
const PLUCKED: ReadonlySet<string> = new Set([
  'queues',
  'classes',
  'nextReady',
  'nextPriority',
  'nextLockExpiry',
  'holding',
  'doneBackoffCount',
  'lastSeq',
  'groupRateTat',
  'flowUp',
  'owingChildren',
]);

export type Statements = { readonly [K in keyof typeof SQL]: Statement };

/**
 * Each statement is prepared on first use and kept: a short command (`kvmq status`) runs a handful of the
 * store's statements, and preparing every one at open is a few milliseconds of its start.
 */
export function prepareStatements(db: BetterSqlite3.Database): Statements {
  const statements: Partial<Record<keyof typeof SQL, Statement>> = {};
  const prepare = (name: keyof typeof SQL): Statement => {
    const statement = db.prepare(SQL[name]);
    return PLUCKED.has(name) ? statement.pluck() : statement;
  };
  const lazy = {};
  for (const name of Object.keys(SQL) as (keyof typeof SQL)[]) {
    Object.defineProperty(lazy, name, { enumerable: true, get: () => (statements[name] ??= prepare(name)) });
  }
  return lazy as Statements;
}

/** A message row as claim reads it. */
export interface MessageRow {
  readonly seq: number;
  readonly id: string;
  readonly payload: Buffer;
  readonly encoding: number;
  readonly metadata: string;
  readonly filters: string;
  readonly attempt: number;
  readonly ready_at: number;
  readonly lock_until: number;
  readonly requeue: number;
  readonly policy: string | null;
}

export interface QueueRow {
  readonly size: number;
  readonly done: number;
  readonly failed: number;
  readonly dry_runs: number;
  readonly eoq_until: number;
  readonly gc_at: number;
  readonly gc_lock_until: number;
  readonly config: string | null;
  readonly rate_tat: number;
  readonly waiting: number;
}
