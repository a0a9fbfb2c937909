/**
 * Queue events on SQLite. A transaction's events for a queue are buffered while it runs and written at its
 * end as one kvmq_events row holding them as a JSON list, so they commit or roll back with the transition and
 * cost one insert per transaction. An event's cursor is `seq.index`: the row and its place in the row's list. A
 * row's seq is the queue's count of events written before it (plus one), so seqs grow and `seq + index` numbers
 * every event. Trimming deletes whole rows, or moves a row's `first` past trimmed
 * events; the queue's newest row is only ever emptied that way, so the next row's seq follows it. Each queue
 * keeps the position of the last event trimmed, so a reader behind it is told it missed events.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { QUEUE_EVENT_TYPES, type QueueEventType, type StoredEvent } from '../model/events.js';
import { errorTail } from '../model/history.js';
import type { EventPage } from '../store/contract.js';
import type { QueueConfig } from '../model/types.js';

const TYPE_CODES = new Map<QueueEventType, number>(QUEUE_EVENT_TYPES.map((type, code) => [type, code]));
const CURSOR = /^(0|[1-9][0-9]{0,15})\.(0|[1-9][0-9]{0,9})$/;
// Trim after this many of a queue's events written by this store, or a tenth of eventsMaxCount if smaller.
const TRIM_EVERY = 1000;

/** An event as a row's list keeps it: type code, id, attempt, and the error when there is one. */
type ListedEvent = readonly [number, string, number] | readonly [number, string, number, string];

/** An event waiting for its transaction's end: the queue it belongs to, and the event. */
export type PendingEvent = readonly [string, ListedEvent];

export function pendingEvent(
  queue: string,
  type: QueueEventType,
  id: string,
  attempt: number,
  error: string | null,
): PendingEvent {
  const code = TYPE_CODES.get(type) ?? 0;
  const tail = errorTail(error);
  return [queue, tail === null ? [code, id, attempt] : [code, id, attempt, tail]];
}

/** A position in a queue's events: the row's seq and the index in its list. */
type Position = readonly [seq: number, index: number];

interface EventRow {
  readonly seq: number;
  readonly at: number;
  readonly first: number;
  readonly count: number;
  readonly events: string;
}

const SQL = {
  // A row's seq is its first event's position: the previous row's seq plus its count, so the count bound is a
  // seek (the row holding the position `max` before the end), not a walk of the rows kept.
  insert: `INSERT INTO kvmq_events (queue, seq, at, count, events)
       VALUES (?, coalesce((SELECT seq + count FROM kvmq_events WHERE queue = ? ORDER BY seq DESC LIMIT 1), 1), ?, ?, ?)`,
  read: 'SELECT seq, at, first, count, events FROM kvmq_events WHERE queue = ? AND seq >= ? ORDER BY seq',
  newest: 'SELECT seq, count FROM kvmq_events WHERE queue = ? ORDER BY seq DESC LIMIT 1',
  holding: 'SELECT seq, first, count FROM kvmq_events WHERE queue = ? AND seq <= ? ORDER BY seq DESC LIMIT 1',
  trimmed: 'SELECT events_trimmed AS seq, events_trimmed_index AS "index" FROM kvmq_queues WHERE queue = ?',
  // By age: the oldest row newer than the bound. Walks from the oldest, so it costs what it trims.
  keepByAge: 'SELECT seq FROM kvmq_events WHERE queue = ? AND at > ? ORDER BY seq LIMIT 1',
  lastBefore: 'SELECT seq, count FROM kvmq_events WHERE queue = ? AND seq < ? ORDER BY seq DESC LIMIT 1',
  trimRows: 'DELETE FROM kvmq_events WHERE queue = ? AND seq < ?',
  trimInRow: 'UPDATE kvmq_events SET first = ? WHERE queue = ? AND seq = ?',
  markTrimmed: `UPDATE kvmq_queues SET events_trimmed = @seq, events_trimmed_index = @index
       WHERE queue = @queue AND (events_trimmed < @seq OR (events_trimmed = @seq AND events_trimmed_index < @index))`,
} as const;

const PLUCKED: ReadonlySet<string> = new Set(['keepByAge']);

export class EventLog {
  private readonly sql: { readonly [K in keyof typeof SQL]: BetterSqlite3.Statement };
  // Events this store wrote per queue since it last trimmed that queue.
  private readonly sinceTrim = new Map<string, number>();

  constructor(db: BetterSqlite3.Database) {
    const entries = Object.entries(SQL).map(([name, sql]) => {
      const statement = db.prepare(sql);
      return [name, PLUCKED.has(name) ? statement.pluck() : statement];
    });
    this.sql = Object.fromEntries(entries) as typeof this.sql;
  }

  /**
   * Writes a transaction's events (in it), one row per queue, trimming a queue that grew by a tenth since.
   * Returns the queues written to. Nearly every transaction has events of one queue: that path groups nothing.
   */
  write(events: readonly PendingEvent[], now: number, configOf: (queue: string) => QueueConfig): Iterable<string> {
    const queue = events[0]?.[0];
    if (queue === undefined) return [];
    if (events.every(([of]) => of === queue)) {
      this.writeRow(
        queue,
        events.map(([, event]) => event),
        now,
        configOf(queue),
      );
      return [queue];
    }
    const byQueue = new Map<string, ListedEvent[]>();
    for (const [of, event] of events) {
      const list = byQueue.get(of);
      if (list === undefined) byQueue.set(of, [event]);
      else list.push(event);
    }
    for (const [of, list] of byQueue) this.writeRow(of, list, now, configOf(of));
    return byQueue.keys();
  }

  private writeRow(queue: string, list: readonly ListedEvent[], now: number, config: QueueConfig): void {
    this.sql.insert.run(queue, queue, now, list.length, JSON.stringify(list));
    const written = (this.sinceTrim.get(queue) ?? 0) + list.length;
    if (written < Math.min(TRIM_EVERY, Math.ceil(config.eventsMaxCount / 10))) this.sinceTrim.set(queue, written);
    else this.trim(queue, config, now);
  }

  /** Trims the queue's events past its count and age bounds, and marks the last one trimmed. */
  trim(queue: string, config: QueueConfig, now: number): void {
    this.sinceTrim.set(queue, 0);
    const byAge = this.sql.keepByAge.get(queue, now - config.eventsMaxAgeMs) as number | undefined;
    if (byAge === undefined) {
      this.empty(queue);
      return;
    }
    let keepFrom = byAge;
    let mark: Position | null = null;
    const cut = this.countCut(queue, config.eventsMaxCount);
    if (cut !== null && cut.seq >= keepFrom) {
      keepFrom = cut.seq;
      if (cut.first > cut.keptFrom) {
        this.sql.trimInRow.run(cut.first, queue, cut.seq);
        mark = [cut.seq, cut.first - 1];
      }
    }
    const last = this.sql.lastBefore.get(queue, keepFrom) as { seq: number; count: number } | undefined;
    if (last !== undefined) {
      this.sql.trimRows.run(queue, keepFrom);
      mark ??= [last.seq, last.count - 1];
    }
    if (mark !== null) this.markTrimmed(queue, mark);
  }

  /** Trims every event of the queue (clear, or all past their age); a reader behind is told it missed them. */
  empty(queue: string): void {
    this.sinceTrim.set(queue, 0);
    const newest = this.sql.newest.get(queue) as { seq: number; count: number } | undefined;
    if (newest === undefined) return;
    this.sql.trimRows.run(queue, newest.seq);
    this.sql.trimInRow.run(newest.count, queue, newest.seq);
    this.markTrimmed(queue, [newest.seq, newest.count - 1]);
  }

  /** Call in one read transaction, so the trimmed mark and the rows agree. Reads rows until the page is full. */
  page(queue: string, after: string | null, limit: number): EventPage {
    const from = after === null ? null : parseCursor(after);
    const trimmed = this.trimmedMark(queue);
    const missed = from !== null && isAfter(trimmed, from);
    const events: StoredEvent[] = [];
    for (const row of this.sql.read.iterate(queue, from?.[0] ?? 0) as Iterable<EventRow>) {
      const list = JSON.parse(row.events) as ListedEvent[];
      const start = from !== null && row.seq === from[0] ? Math.max(row.first, from[1] + 1) : row.first;
      for (let index = start; index < row.count && events.length < limit; index++) {
        const listed = list[index];
        if (listed !== undefined) events.push(toEvent(row, index, listed));
      }
      if (events.length >= limit) break;
    }
    const last = events.at(-1);
    if (last !== undefined) return { events, missed, cursor: last.cursor };
    // Nothing to read: from the start, the head; past a gap, its end (so the reader is told once).
    if (from === null) return { events, missed, cursor: this.head(queue) };
    return { events, missed, cursor: missed ? cursorOf(trimmed) : cursorOf(from) };
  }

  head(queue: string): string {
    const newest = this.sql.newest.get(queue) as { seq: number; count: number } | undefined;
    return cursorOf(newest === undefined ? this.trimmedMark(queue) : [newest.seq, newest.count - 1]);
  }

  /**
   * The oldest row to keep by count and the index to keep from in it; null: all fit. Rows written before seqs
   * were positions (numbered 1, 2, 3, ...) hold more events than their seqs say: while the cut falls among
   * them, more than `max` are kept, until the age bound or newer events move it past them.
   */
  private countCut(queue: string, max: number): { seq: number; first: number; keptFrom: number } | null {
    const newest = this.sql.newest.get(queue) as { seq: number; count: number } | undefined;
    if (newest === undefined) return null;
    const from = newest.seq + newest.count - max;
    const row = this.sql.holding.get(queue, from) as { seq: number; first: number; count: number } | undefined;
    if (row === undefined) return null;
    return { seq: row.seq, first: Math.min(from - row.seq, row.count), keptFrom: row.first };
  }

  private trimmedMark(queue: string): Position {
    const row = this.sql.trimmed.get(queue) as { seq: number; index: number } | undefined;
    return row === undefined ? [0, 0] : [row.seq, row.index];
  }

  private markTrimmed(queue: string, [seq, index]: Position): void {
    this.sql.markTrimmed.run({ queue, seq, index });
  }
}

function toEvent(row: EventRow, index: number, [code, id, attempt, error]: ListedEvent): StoredEvent {
  const base = {
    type: QUEUE_EVENT_TYPES[code] ?? 'enqueued',
    id,
    at: row.at,
    attempt,
    cursor: cursorOf([row.seq, index]),
  };
  return error === undefined ? base : { ...base, error };
}

function isAfter(a: Position, b: Position): boolean {
  return a[0] > b[0] || (a[0] === b[0] && a[1] > b[1]);
}

function cursorOf([seq, index]: Position): string {
  return `${seq}.${index}`;
}

function parseCursor(cursor: string): Position {
  const match = CURSOR.exec(cursor);
  if (match === null) {
    throw new TypeError(
      `event cursor ${JSON.stringify(cursor.slice(0, 40))} is not one this SQLite store made; ` +
        'pass back the cursor of an event, a page or eventsHead',
    );
  }
  return [Number(match[1]), Number(match[2])];
}
