/**
 * Queue events on SQLite. A transaction's events for a queue are buffered while it runs and written at its
 * end, so they commit or roll back with the transition. They are written first into the queue's row
 * (`events_buffer`), which enqueue and finish write anyway, and move to a kvmq_events row of their own, a JSON
 * list, once about 16 have gathered: most commits then dirty no page of the events b-tree. An event's cursor
 * is `seq.index`: the row and its place in the row's list. A row's seq is the queue's count of events written
 * before it (plus one), so seqs grow and `seq + index` numbers every event; the buffer is read as the row it
 * will become (the next seq), so a cursor into it stays valid once it is moved. Trimming moves the buffer to
 * its row first, then deletes whole rows, or moves a row's `first` past trimmed events; the queue's newest row
 * is only ever emptied that way, so the next row's seq follows it. Each queue keeps the position of the last
 * event trimmed, so a reader behind it is told it missed events.
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
// A queue's buffered events move to a row of their own once this many gather, or before the queue row would
// pass this many characters: a WITHOUT ROWID row over about 1,000 bytes spills to an overflow page, which
// would cost the very page write the buffer saves.
const FLUSH_EVENTS = 16;
const ROW_CHARS = 900;

/**
 * An event as a row's list keeps it: type code, id, attempt, the error or null, and when it was written.
 * Rows written before the buffer have no time (the row's `at` is theirs) and no error slot when it is null.
 */
type ListedEvent =
  | readonly [number, string, number]
  | readonly [number, string, number, string | null]
  | readonly [number, string, number, string | null, number];

/** An event before it is written: type code, id, attempt, the error or null. */
type NewEvent = readonly [number, string, number, string | null];

/** An event waiting for its transaction's end: the queue it belongs to, and the event. */
export type PendingEvent = readonly [string, NewEvent];

export function pendingEvent(
  queue: string,
  type: QueueEventType,
  id: string,
  attempt: number,
  error: string | null,
): PendingEvent {
  return [queue, [TYPE_CODES.get(type) ?? 0, id, attempt, errorTail(error)]];
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

interface Buffered {
  readonly count: number;
  readonly text: string;
}

const SQL = {
  // A row's seq is its first event's position: the previous row's seq plus its count, so the count bound is a
  // seek (the row holding the position `max` before the end), not a walk of the rows kept.
  insert: `INSERT INTO kvmq_events (queue, seq, at, count, events)
       VALUES (?, coalesce((SELECT seq + count FROM kvmq_events WHERE queue = ? ORDER BY seq DESC LIMIT 1), 1), ?, ?, ?)`,
  buffered: 'SELECT events_buffered AS count, events_buffer AS text FROM kvmq_queues WHERE queue = ?',
  // Appends to the buffer while it stays under FLUSH_EVENTS events and the row under ROW_CHARS characters.
  append: `UPDATE kvmq_queues SET events_buffered = events_buffered + @n,
         events_buffer = CASE events_buffered WHEN 0 THEN @text ELSE events_buffer || ',' || @text END
       WHERE queue = @queue AND events_buffered + @n < ${FLUSH_EVENTS}
         AND length(queue) + coalesce(length(config), 0) + length(events_buffer) + 1 + length(@text) <= ${ROW_CHARS}`,
  setBuffer: 'UPDATE kvmq_queues SET events_buffer = ?, events_buffered = ? WHERE queue = ?',
  ensureQueue: 'INSERT INTO kvmq_queues (queue) VALUES (?) ON CONFLICT DO NOTHING',
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
      this.writeEvents(
        queue,
        events.map(([, event]) => event),
        now,
        configOf(queue),
      );
      return [queue];
    }
    const byQueue = new Map<string, NewEvent[]>();
    for (const [of, event] of events) {
      const list = byQueue.get(of);
      if (list === undefined) byQueue.set(of, [event]);
      else list.push(event);
    }
    for (const [of, list] of byQueue) this.writeEvents(of, list, now, configOf(of));
    return byQueue.keys();
  }

  /**
   * Appends the events to the queue's buffer, or, when that would make it too large, writes the buffer and them
   * as the queue's next row. Buffered
   * events carry their time; those written straight into a row (timed `now`) leave it to the row, as a batch
   * of a thousand would otherwise repeat it a thousand times.
   */
  private writeEvents(queue: string, list: readonly NewEvent[], now: number, config: QueueConfig): void {
    // Nearly always one statement: the append, which changes nothing when the buffer would grow too large.
    const timed = listItems(list.map(([code, id, attempt, error]) => [code, id, attempt, error, now]));
    const appended = list.length < FLUSH_EVENTS && this.sql.append.run({ queue, text: timed, n: list.length });
    if (appended === false || appended.changes === 0) {
      let buffered = this.buffered(queue);
      if (buffered === undefined) {
        // A queue written to only as another's dead-letter queue may have no row yet.
        this.sql.ensureQueue.run(queue);
        buffered = { count: 0, text: '' };
      }
      const text = listItems(list.map(rowTimed));
      const joined = buffered.count === 0 ? text : `${buffered.text},${text}`;
      this.sql.insert.run(queue, queue, now, buffered.count + list.length, `[${joined}]`);
      if (buffered.count > 0) this.sql.setBuffer.run('', 0, queue);
    }
    const written = (this.sinceTrim.get(queue) ?? 0) + list.length;
    if (written < Math.min(TRIM_EVERY, Math.ceil(config.eventsMaxCount / 10))) this.sinceTrim.set(queue, written);
    else this.trim(queue, config, now);
  }

  /** Moves the queue's buffered events to their row, timed as the newest of them, so trimming sees them. */
  private flush(queue: string): void {
    const buffered = this.buffered(queue);
    if (buffered === undefined || buffered.count === 0) return;
    const list = JSON.parse(`[${buffered.text}]`) as ListedEvent[];
    this.sql.insert.run(queue, queue, list.at(-1)?.[4] ?? 0, buffered.count, `[${buffered.text}]`);
    this.sql.setBuffer.run('', 0, queue);
  }

  private buffered(queue: string): Buffered | undefined {
    return this.sql.buffered.get(queue) as Buffered | undefined;
  }

  /** Trims the queue's events past its count and age bounds, and marks the last one trimmed. */
  trim(queue: string, config: QueueConfig, now: number): void {
    this.sinceTrim.set(queue, 0);
    this.flush(queue);
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
    this.flush(queue);
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
    if (events.length < limit) this.readBuffer(queue, from, limit, events);
    const last = events.at(-1);
    if (last !== undefined) return { events, missed, cursor: last.cursor };
    // Nothing to read: from the start, the head; past a gap, its end (so the reader is told once).
    if (from === null) return { events, missed, cursor: this.head(queue) };
    return { events, missed, cursor: missed ? cursorOf(trimmed) : cursorOf(from) };
  }

  /** Adds the buffered events after `from` to the page, read as the row they will become. */
  private readBuffer(queue: string, from: Position | null, limit: number, events: StoredEvent[]): void {
    const buffered = this.buffered(queue);
    if (buffered === undefined || buffered.count === 0) return;
    const seq = this.nextSeq(queue);
    if (from !== null && from[0] > seq) return;
    const row: EventRow = { seq, at: 0, first: 0, count: buffered.count, events: `[${buffered.text}]` };
    const list = JSON.parse(row.events) as ListedEvent[];
    for (let index = from?.[0] === seq ? from[1] + 1 : 0; index < row.count && events.length < limit; index++) {
      const listed = list[index];
      if (listed !== undefined) events.push(toEvent(row, index, listed));
    }
  }

  head(queue: string): string {
    const buffered = this.buffered(queue);
    if (buffered !== undefined && buffered.count > 0) return cursorOf([this.nextSeq(queue), buffered.count - 1]);
    const newest = this.sql.newest.get(queue) as { seq: number; count: number } | undefined;
    return cursorOf(newest === undefined ? this.trimmedMark(queue) : [newest.seq, newest.count - 1]);
  }

  /** The seq the queue's next row takes: the one its buffer is read as. */
  private nextSeq(queue: string): number {
    const newest = this.sql.newest.get(queue) as { seq: number; count: number } | undefined;
    return newest === undefined ? 1 : newest.seq + newest.count;
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

function toEvent(row: EventRow, index: number, [code, id, attempt, error, at]: ListedEvent): StoredEvent {
  const base = {
    type: QUEUE_EVENT_TYPES[code] ?? 'enqueued',
    id,
    at: at ?? row.at,
    attempt,
    cursor: cursorOf([row.seq, index]),
  };
  return error === undefined || error === null ? base : { ...base, error };
}

/** An event timed by its row: its error only when it has one. */
function rowTimed([code, id, attempt, error]: NewEvent): ListedEvent {
  return error === null ? [code, id, attempt] : [code, id, attempt, error];
}

/** The items of a JSON list, without its brackets: what a buffer and a row's list are made of. */
function listItems(list: readonly ListedEvent[]): string {
  return JSON.stringify(list).slice(1, -1);
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
