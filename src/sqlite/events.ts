/**
 * Queue events on SQLite: rows of kvmq_events, written in the transaction of each transition (buffered while
 * it runs, then inserted in multi-row statements), read by the (queue, seq) index, and trimmed by count and age.
 * A cursor is the event's seq in decimal. Each queue keeps the highest seq trimmed from it, so a reader whose
 * cursor is below it is told it missed events.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { QUEUE_EVENT_TYPES, type QueueEventType, type StoredEvent } from '../model/events.js';
import { errorTail } from '../model/history.js';
import { chunked, type ChunkedStatement } from './chunked.js';
import type { EventPage } from '../store/contract.js';
import type { QueueConfig } from '../model/types.js';

const TYPE_CODES = new Map<QueueEventType, number>(QUEUE_EVENT_TYPES.map((type, code) => [type, code]));
const CURSOR = /^(0|[1-9][0-9]{0,15})$/;
// Trim after this many of a queue's events written by this store, or a tenth of eventsMaxCount if smaller.
const TRIM_EVERY = 1000;

/** An event waiting for its transaction to insert it: queue, type code, id, at, attempt, error. */
export type PendingEvent = readonly [string, number, string, number, number, string | null];

export function pendingEvent(
  queue: string,
  type: QueueEventType,
  id: string,
  at: number,
  attempt: number,
  error: string | null,
): PendingEvent {
  return [queue, TYPE_CODES.get(type) ?? 0, id, at, attempt, errorTail(error)];
}

interface EventRow {
  readonly seq: number;
  readonly type: number;
  readonly id: string;
  readonly at: number;
  readonly attempt: number;
  readonly error: string | null;
}

const SQL = {
  read: 'SELECT seq, type, id, at, attempt, error FROM kvmq_events WHERE queue = ? AND seq > ? ORDER BY seq LIMIT ?',
  newest: 'SELECT max(seq) FROM kvmq_events WHERE queue = ?',
  trimmed: 'SELECT events_trimmed FROM kvmq_queues WHERE queue = ?',
  // The seq of the oldest event to keep by count: the eventsMaxCount-th newest (none: fewer than that).
  keepByCount: 'SELECT seq FROM kvmq_events WHERE queue = ? ORDER BY seq DESC LIMIT 1 OFFSET ?',
  // By age: the oldest event newer than the bound. Walks from the oldest, so it costs what it trims.
  keepByAge: 'SELECT seq FROM kvmq_events WHERE queue = ? AND at > ? ORDER BY seq LIMIT 1',
  lastBefore: 'SELECT max(seq) FROM kvmq_events WHERE queue = ? AND seq < ?',
  trim: 'DELETE FROM kvmq_events WHERE queue = ? AND seq < ?',
  markTrimmed: 'UPDATE kvmq_queues SET events_trimmed = max(events_trimmed, ?) WHERE queue = ?',
  clear: 'DELETE FROM kvmq_events WHERE queue = ?',
} as const;

const PLUCKED: ReadonlySet<string> = new Set(['newest', 'trimmed', 'keepByCount', 'keepByAge', 'lastBefore']);

export class EventLog {
  private readonly sql: { readonly [K in keyof typeof SQL]: BetterSqlite3.Statement };
  private readonly insert: ChunkedStatement;
  // Events this store wrote per queue since it last trimmed that queue.
  private readonly sinceTrim = new Map<string, number>();

  constructor(db: BetterSqlite3.Database) {
    const entries = Object.entries(SQL).map(([name, sql]) => {
      const statement = db.prepare(sql);
      return [name, PLUCKED.has(name) ? statement.pluck() : statement];
    });
    this.sql = Object.fromEntries(entries) as typeof this.sql;
    this.insert = chunked(
      db,
      (n) =>
        'INSERT INTO kvmq_events (queue, type, id, at, attempt, error) VALUES ' +
        Array.from({ length: n }, () => '(?, ?, ?, ?, ?, ?)').join(', ') +
        ' RETURNING seq',
    );
  }

  /** Inserts a transaction's events (in its transaction), trimming a queue that has grown by a tenth since. */
  write(events: readonly PendingEvent[], now: number, configOf: (queue: string) => QueueConfig): void {
    this.insert([], events);
    for (const [queue] of events) {
      const written = (this.sinceTrim.get(queue) ?? 0) + 1;
      const config = configOf(queue);
      if (written < Math.min(TRIM_EVERY, Math.ceil(config.eventsMaxCount / 10))) {
        this.sinceTrim.set(queue, written);
      } else {
        this.trim(queue, config, now);
      }
    }
  }

  /** Deletes events past the queue's count and age bounds, and remembers the highest seq deleted. */
  trim(queue: string, config: QueueConfig, now: number): void {
    this.sinceTrim.set(queue, 0);
    const byCount = this.sql.keepByCount.get(queue, config.eventsMaxCount - 1) as number | undefined;
    const byAge = this.sql.keepByAge.get(queue, now - config.eventsMaxAgeMs) as number | undefined;
    // No event newer than the age bound: every one goes.
    const keepFrom = Math.max(byCount ?? 0, byAge ?? Number.MAX_SAFE_INTEGER);
    const last = this.sql.lastBefore.get(queue, keepFrom) as number | null;
    if (last === null) return;
    this.sql.trim.run(queue, keepFrom);
    this.sql.markTrimmed.run(last, queue);
  }

  /** Deletes every event of the queue; a reader behind is told it missed them. */
  clear(queue: string): void {
    const newest = this.sql.newest.get(queue) as number | null;
    if (newest === null) return;
    this.sql.clear.run(queue);
    this.sql.markTrimmed.run(newest, queue);
    this.sinceTrim.set(queue, 0);
  }

  /** Call in one read transaction, so the trimmed mark and the rows agree. */
  page(queue: string, after: string | null, limit: number): EventPage {
    const from = after === null ? 0 : parseCursor(after);
    const trimmed = (this.sql.trimmed.get(queue) as number | undefined) ?? 0;
    const rows = this.sql.read.all(queue, from, limit) as EventRow[];
    const missed = after !== null && trimmed > from;
    const events = rows.map(toEvent);
    const last = events.at(-1);
    if (last !== undefined) return { events, missed, cursor: last.cursor };
    // Nothing to read: read on from past the gap (so it is told once), or from the head when asked from the start.
    if (after === null) return { events, missed, cursor: this.head(queue) };
    return { events, missed, cursor: missed ? String(trimmed) : after };
  }

  head(queue: string): string {
    const newest = this.sql.newest.get(queue) as number | null;
    return String(newest ?? (this.sql.trimmed.get(queue) as number | undefined) ?? 0);
  }
}

function toEvent(row: EventRow): StoredEvent {
  const base = {
    type: QUEUE_EVENT_TYPES[row.type] ?? 'enqueued',
    id: row.id,
    at: row.at,
    attempt: row.attempt,
    cursor: String(row.seq),
  };
  return row.error === null ? base : { ...base, error: row.error };
}

function parseCursor(cursor: string): number {
  if (!CURSOR.test(cursor)) {
    throw new TypeError(
      `event cursor ${JSON.stringify(cursor.slice(0, 40))} is not one this SQLite store made; ` +
        'pass back the cursor of an event, a page or eventsHead',
    );
  }
  return Number(cursor);
}
