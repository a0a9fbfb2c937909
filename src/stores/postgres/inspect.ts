/** Reading messages and queues: status, details, counts per state, live consumers. */
import { parseHistory } from '../../model/history.js';
import { MESSAGE_STATES, type ConsumerInfo, type MessageState, type MessageStatus } from '../../model/types.js';
// Rows read as on SQLite: one mapping for both.
import {
  consumerInfo,
  contentOf,
  statusOf,
  type ConsumerRow,
  type ContentRow,
  type StatusRow,
} from '../sqlite/inspect.js';
import { pendingRanges } from './ranges.js';
import type { Queryable } from './queryable.js';
import type { StoredDetails } from '../contract/contract.js';

export const STATUS_FIELDS =
  'seq, id, phase, ready_at, lock_until, backoff_until, requeue, attempt, outcome, last_error, consumer, enqueued_at, updated_at';
export const CONTENT_FIELDS = 'payload, encoding, metadata, filters, result, result_encoding';

export async function messageStatus(
  db: Queryable,
  s: string,
  queue: string,
  id: string,
): Promise<MessageStatus | null> {
  const { rows } = await db.query<StatusRow>(
    `SELECT ${STATUS_FIELDS}, result, result_encoding FROM ${s}.messages WHERE queue = $1 AND id = $2`,
    [queue, id],
  );
  const row = rows[0];
  return row === undefined ? null : statusOf(queue, row, Date.now());
}

type DetailsRow = StatusRow &
  ContentRow & { policy: string | null; history: string | null; priority: number; group_name: string | null };

export async function messageDetails(
  db: Queryable,
  s: string,
  queue: string,
  id: string,
): Promise<StoredDetails | null> {
  const { rows } = await db.query<DetailsRow>(
    `SELECT ${STATUS_FIELDS}, ${CONTENT_FIELDS}, policy, history, priority, group_name FROM ${s}.messages
     WHERE queue = $1 AND id = $2`,
    [queue, id],
  );
  const row = rows[0];
  if (row === undefined) return null;
  return {
    status: statusOf(queue, row, Date.now()),
    content: contentOf(row),
    policy: row.policy,
    history: parseHistory(row.history),
    priority: row.priority,
    group: row.group_name,
  };
}

interface CountsRow {
  readonly size: number;
  readonly done: number;
  readonly failed: number;
  readonly classes: string[];
}

/**
 * Counts per state from the queue's counters (pending + locked, done, failed), summed over their slots. A
 * state split by time is counted by walking only the rows of the time-limited side: every lock, pending
 * backoffs (per filter class and priority) and duplicate backoffs; never the ready backlog nor the finished rows.
 * Flows' parents waiting for their children are in no counter: they are counted from their own index.
 * Run in one snapshot (the caller's REPEATABLE READ transaction).
 */
export async function stateCounts(
  db: Queryable,
  s: string,
  queue: string,
  now: number,
): Promise<Record<MessageState, number>> {
  const counts = Object.fromEntries(MESSAGE_STATES.map((state) => [state, 0])) as Record<MessageState, number>;
  const totals = await db.query<CountsRow>(
    `SELECT coalesce(sum(size), 0) AS size, coalesce(sum(done), 0) AS done, coalesce(sum(failed), 0) AS failed,
       ARRAY(SELECT filters FROM ${s}.classes WHERE queue = $1) AS classes
     FROM ${s}.counts WHERE queue = $1`,
    [queue],
  );
  const row = totals.rows[0];
  if (row === undefined) return counts;
  const split = await db.query<{ kind: string; n: number }>(
    `${pendingRanges(s)}
     SELECT CASE WHEN lock_until <= $3 THEN 'queued' WHEN requeue = 1 THEN 'locked-with-requeue' ELSE 'locked' END
         AS kind, count(*) AS n
       FROM ${s}.messages WHERE queue = $1 AND phase = 1 GROUP BY 1
     UNION ALL
     SELECT CASE WHEN m.requeue = 1 THEN 'done-with-requeue' ELSE 'queued-with-backoff' END, count(*)
       FROM ranges r JOIN ${s}.messages m ON m.queue = $1 AND m.filters = r.filters AND m.phase = 0
         AND m.priority = r.priority AND m.ready_at > $3
       GROUP BY 1
     UNION ALL
     SELECT 'done-with-backoff', count(*) FROM ${s}.messages
       WHERE queue = $1 AND phase = 2 AND backoff_until > 0 AND backoff_until > $3
     UNION ALL
     SELECT 'waiting-children', count(*) FROM ${s}.messages WHERE queue = $1 AND phase = 4`,
    [queue, row.classes, now],
  );
  let pending = row.size;
  for (const { kind, n } of split.rows) {
    counts[kind as MessageState] += n;
    if (kind !== 'done-with-backoff' && kind !== 'waiting-children') pending -= n;
  }
  counts.queued += pending;
  counts['done-awaiting-gc'] = row.done - counts['done-with-backoff'];
  counts.failed = row.failed;
  return counts;
}

export async function liveConsumers(db: Queryable, s: string, queue: string, now: number): Promise<ConsumerInfo[]> {
  // The queue's held messages read once (messages_locked), grouped by holder.
  const { rows } = await db.query<ConsumerRow & { holding: string[] }>(
    `WITH held AS (
       SELECT m.consumer, array_agg(m.id ORDER BY m.seq) AS ids FROM ${s}.messages m
       WHERE m.queue = $1 AND m.phase = 1 AND m.lock_until > $2 GROUP BY m.consumer)
     SELECT c.id, c.host, c.pid, c.started_at, c.seen_at, coalesce(h.ids, '{}') AS holding
     FROM ${s}.consumers c LEFT JOIN held h ON h.consumer = c.id
     WHERE c.queue = $1 AND c.expires_at > $2 ORDER BY c.started_at`,
    [queue, now],
  );
  return rows.map((row) => consumerInfo(row, row.holding));
}
