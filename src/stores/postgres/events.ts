/**
 * Queue events on PostgreSQL: one row per event, keyed by (queue, seq). A transaction that records events takes
 * their numbers from the queue row's `events_seq` (sql-functions.ts `add_events`), which it holds locked until
 * it commits, so a queue's events commit in the order of their numbers and a reader never passes one that
 * commits later. The cursor is the number. Trimming (GC) deletes by count and age and remembers the last
 * number trimmed, so a reader behind it is told it missed events.
 */
import { QUEUE_EVENT_TYPES, type StoredEvent } from '../../model/events.js';
import type { Queryable } from './queryable.js';
import type { EventPage } from '../contract/contract.js';
import type { QueueConfig } from '../../model/types.js';

const CURSOR = /^(0|[1-9][0-9]{0,15})$/;

interface EventRow {
  readonly trimmed: number;
  readonly seq: number | null;
  readonly at: number;
  readonly type: number;
  readonly id: string;
  readonly attempt: number;
  readonly error: string | null;
}

function readCursor(cursor: string): number {
  if (!CURSOR.test(cursor)) {
    throw new TypeError(
      `event cursor ${JSON.stringify(cursor)} is not one this store made (a cursor from an event, a page or eventsHead)`,
    );
  }
  return Number(cursor);
}

export async function readEvents(
  db: Queryable,
  s: string,
  queue: string,
  after: string | null,
  limit: number,
): Promise<EventPage> {
  const from = after === null ? null : readCursor(after);
  // One statement: the trimmed mark and the page from one snapshot.
  const { rows } = await db.query<EventRow>(
    `SELECT t.trimmed, e.seq, e.at, e.type, e.id, e.attempt, e.error
     FROM (SELECT coalesce((SELECT events_trimmed FROM ${s}.queues WHERE queue = $1), 0) AS trimmed) t
     LEFT JOIN LATERAL (SELECT * FROM ${s}.events WHERE queue = $1 AND seq > greatest($2, t.trimmed)
       ORDER BY seq LIMIT $3) e ON true`,
    [queue, from ?? 0, limit],
  );
  const trimmed = rows[0]?.trimmed ?? 0;
  const missed = from !== null && from < trimmed;
  const events: StoredEvent[] = [];
  for (const row of rows) {
    if (row.seq === null) continue;
    events.push({
      type: QUEUE_EVENT_TYPES[row.type] ?? 'enqueued',
      id: row.id,
      at: row.at,
      attempt: row.attempt,
      ...(row.error === null ? {} : { error: row.error }),
      cursor: String(row.seq),
    });
  }
  const cursor = events.at(-1)?.cursor ?? String(Math.max(from ?? 0, trimmed));
  return { events, missed, cursor: after !== null && !missed && events.length === 0 ? after : cursor };
}

export async function eventsHead(db: Queryable, s: string, queue: string): Promise<string> {
  const { rows } = await db.query<{ seq: number }>(`SELECT events_seq AS seq FROM ${s}.queues WHERE queue = $1`, [
    queue,
  ]);
  return String(rows[0]?.seq ?? 0);
}

/** Deletes events past the queue's count and age bounds; the last one deleted is remembered. */
export async function trimEvents(
  db: Queryable,
  s: string,
  queue: string,
  config: QueueConfig,
  now: number,
): Promise<void> {
  await db.query(
    `WITH gone AS (
       DELETE FROM ${s}.events e USING ${s}.queues q
       WHERE e.queue = $1 AND q.queue = $1 AND (e.seq <= q.events_seq - $2 OR e.at < $3)
       RETURNING e.seq)
     UPDATE ${s}.queues SET events_trimmed = greatest(events_trimmed, (SELECT max(seq) FROM gone))
     WHERE queue = $1 AND EXISTS (SELECT 1 FROM gone)`,
    [queue, config.eventsMaxCount, now - config.eventsMaxAgeMs],
  );
}

/** Removes a queue's events (clear); numbers go on from where they were, so old cursors stay behind. */
export async function emptyEvents(db: Queryable, s: string, queue: string): Promise<void> {
  await db.query(
    `WITH gone AS (DELETE FROM ${s}.events WHERE queue = $1)
     UPDATE ${s}.queues SET events_trimmed = events_seq WHERE queue = $1`,
    [queue],
  );
}
