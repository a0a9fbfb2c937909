/**
 * Queue events on SQLite. A transaction's events for a queue are buffered while it runs and written at its
 * end, so they commit or roll back with the transition. They are written first into the queue's row
 * (`events_buffer`), which enqueue and finish write anyway, and move to a kvmq_events row once the queue row
 * would pass ROW_CHARS: most commits then dirty no page of the events table. Lists are kept in the compact text
 * of event-text.ts; rows from before schema 7 hold JSON lists and are read as such. An event's cursor is
 * `seq.index`: the row and its place in the row's list. A row's seq is the queue's count of events written
 * before it (plus one), so seqs grow and `seq + index` numbers every event. The newest row grows in place while
 * its list is under LIST_CHARS (one page rewritten per move, where a new row would split a leaf every few rows);
 * the buffer is read where it will go, on in the newest row when that row has room for a whole buffer, else as
 * the next row, so a cursor into it stays valid once it is moved. Trimming deletes whole rows, or moves a row's
 * `first` past trimmed events (the buffer moves first only when a bound reaches into it); the queue's newest row
 * is only ever emptied that way, so the next row's seq follows it. Each queue keeps the position of the last
 * event trimmed, so a reader behind it is told it missed events.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { eventSlotText, QUEUE_EVENT_TYPES, type QueueEventType, type StoredEvent } from '../../model/events.js';
import type { EventPage } from '../contract/contract.js';
import type { QueueConfig } from '../../model/types.js';
import { decodeEvents, eventRecord, firstTime, timeRecord, type DecodedEvent } from './event-text.js';

const TYPE_CODES = new Map<QueueEventType, number>(QUEUE_EVENT_TYPES.map((type, code) => [type, code]));
const CURSOR = /^(0|[1-9][0-9]{0,15})\.(0|[1-9][0-9]{0,9})$/;
// Trim after this many of a queue's events written by this store, or a tenth of eventsMaxCount if smaller.
const TRIM_EVERY = 1000;
// A queue's buffered events move out before the queue row would pass this many characters: a WITHOUT ROWID
// row over about 1,000 bytes spills to an overflow page, which would cost the very page write the buffer saves.
const ROW_CHARS = 900;
// An events row grows while its list stays under this many characters, so it fills a page of its own (a rowid
// table keeps up to 4,061 bytes of a row in its leaf) and each move rewrites that one page. The buffer is read
// as the newest row's continuation when that row has room for a whole buffer, else as the next row.
const LIST_CHARS = 3600;
const CONTINUE_CHARS = LIST_CHARS - ROW_CHARS;

/**
 * An event as a JSON list from before schema 7 keeps it: type code, id, attempt, the error or null, and when
 * it was written. Rows written before schema 6 have no time (the row's `at` is theirs) and no error slot when
 * it is null.
 */
type ListedEvent =
  | readonly [number, string, number]
  | readonly [number, string, number, string | null]
  | readonly [number, string, number, string | null, number];

/** An event waiting for its transaction's end: the queue it belongs to, and its record (event-text.ts). */
export type PendingEvent = readonly [string, string];

export function pendingEvent(
  queue: string,
  type: QueueEventType,
  id: string,
  attempt: number,
  error: string | null,
): PendingEvent {
  return [queue, eventRecord(TYPE_CODES.get(type) ?? 0, id, attempt, eventSlotText(type, error))];
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

/** A queue's newest row: where its buffer goes and what its cursors read as. */
interface Newest {
  readonly id: number;
  readonly seq: number;
  readonly count: number;
  /** Its list's size in bytes, and whether it is JSON (from before schema 7: it takes no more events). */
  readonly bytes: number;
  readonly json: number;
}

/** Changes to a queue's `size` and `done` counters that its transaction's events are written with. */
export interface Counts {
  readonly queue: string;
  readonly size: number;
  readonly done: number;
}

/** Where a queue's buffered events read: the row's seq, and the index in it of the buffer's first event. */
type BufferBase = readonly [seq: number, offset: number];

/** Where a bound cuts a queue's events: the oldest row kept, the index kept from in it, and its `first` so far. */
interface Cut {
  readonly seq: number;
  readonly first: number;
  readonly keptFrom: number;
}

const SQL = {
  // A row's seq is its first event's position: the previous row's seq plus its count, so the count bound is a
  // seek (the row holding the position `max` before the end), not a walk of the rows kept.
  insert: 'INSERT INTO kvmq_events (queue, seq, at, count, events) VALUES (?, ?, ?, ?, ?)',
  extend: 'UPDATE kvmq_events SET events = events || ?, count = count + ?, at = max(at, ?) WHERE id = ?',
  buffered: 'SELECT events_buffered AS count, events_buffer AS text FROM kvmq_queues WHERE queue = ?',
  // Appends to the buffer while the row stays under ROW_CHARS characters.
  // Parameters by position and sizes in bytes (octet_length reads no characters): it runs at nearly every commit.
  append: `UPDATE kvmq_queues SET events_buffered = events_buffered + ?, events_buffer = events_buffer || ?
       WHERE queue = ?
         AND octet_length(queue) + coalesce(octet_length(config), 0) + octet_length(events_buffer) + octet_length(?)
           <= ${ROW_CHARS}`,
  // The append with the transaction's counter changes: what a finish or an enqueue writes to its queue row.
  countedAppend: `UPDATE kvmq_queues SET size = size + ?, done = done + ?,
         events_buffered = events_buffered + ?, events_buffer = events_buffer || ?
       WHERE queue = ?
         AND octet_length(queue) + coalesce(octet_length(config), 0) + octet_length(events_buffer) + octet_length(?)
           <= ${ROW_CHARS}`,
  counts: 'UPDATE kvmq_queues SET size = size + ?, done = done + ? WHERE queue = ?',
  setBuffer: 'UPDATE kvmq_queues SET events_buffer = ?, events_buffered = ? WHERE queue = ?',
  ensureQueue: 'INSERT INTO kvmq_queues (queue) VALUES (?) ON CONFLICT DO NOTHING',
  read: 'SELECT seq, at, first, count, events FROM kvmq_events WHERE queue = ? AND seq >= ? ORDER BY seq',
  newest: `SELECT id, seq, count, octet_length(events) AS bytes, substr(events, 1, 1) = '[' AS json
       FROM kvmq_events WHERE queue = ? ORDER BY seq DESC LIMIT 1`,
  holding: 'SELECT seq, first, count FROM kvmq_events WHERE queue = ? AND seq <= ? ORDER BY seq DESC LIMIT 1',
  row: 'SELECT seq, at, first, count, events FROM kvmq_events WHERE queue = ? AND seq = ?',
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
  write(
    events: readonly PendingEvent[],
    now: number,
    configOf: (queue: string) => QueueConfig,
    counts: Counts | null = null,
  ): Iterable<string> {
    const queue = events[0]?.[0];
    if (queue === undefined) return [];
    if (events.every(([of]) => of === queue)) {
      if (counts !== null && counts.queue !== queue) this.sql.counts.run(counts.size, counts.done, counts.queue);
      this.writeEvents(
        queue,
        events.map(([, event]) => event),
        now,
        configOf(queue),
        counts?.queue === queue ? counts : null,
      );
      return [queue];
    }
    const byQueue = new Map<string, string[]>();
    for (const [of, event] of events) {
      const list = byQueue.get(of);
      if (list === undefined) byQueue.set(of, [event]);
      else list.push(event);
    }
    if (counts !== null && !byQueue.has(counts.queue)) this.sql.counts.run(counts.size, counts.done, counts.queue);
    for (const [of, list] of byQueue)
      this.writeEvents(of, list, now, configOf(of), counts?.queue === of ? counts : null);
    return byQueue.keys();
  }

  /**
   * Appends the events to the queue's buffer, after the record of their time. When the queue row would grow too
   * large, the buffer moves out (where its cursors say, newestRow) and the events go along or follow it.
   */
  private writeEvents(
    queue: string,
    records: readonly string[],
    now: number,
    config: QueueConfig,
    counts: Counts | null,
  ): void {
    const text = timeRecord(now) + (records.length === 1 ? (records[0] ?? '') : records.join(''));
    // Nearly always one statement: the append (with the counters), which changes nothing when the row would grow
    // too large.
    const fits = text.length < ROW_CHARS;
    const appended =
      fits &&
      (counts === null
        ? this.sql.append.run(records.length, text, queue, text)
        : this.sql.countedAppend.run(counts.size, counts.done, records.length, text, queue, text)
      ).changes > 0;
    if (!appended && counts !== null) this.sql.counts.run(counts.size, counts.done, queue);
    if (!appended) {
      let buffered = this.buffered(queue);
      if (buffered === undefined) {
        // A queue written to only as another's dead-letter queue may have no row yet.
        this.sql.ensureQueue.run(queue);
        buffered = { count: 0, text: '' };
      }
      let newest = this.newestRow(queue);
      if (buffered.count > 0) {
        const into = newest !== undefined && continuesRow(newest) ? newest : undefined;
        if (buffered.text.length + text.length <= LIST_CHARS - (into?.bytes ?? 0)) {
          // Together: one statement, timed now.
          this.addList(queue, into, buffered.text + text, buffered.count + records.length, now, newest);
          this.sql.setBuffer.run('', 0, queue);
          this.afterWrite(queue, records.length, now, config);
          return;
        }
        newest = this.moveBuffer(queue, buffered, newest);
      }
      const extendable = newest !== undefined && newest.json === 0 && newest.bytes + text.length <= LIST_CHARS;
      this.addList(queue, extendable ? newest : undefined, text, records.length, now, newest);
    }
    this.afterWrite(queue, records.length, now, config);
  }

  /** Counts what this store wrote to the queue, trimming it every tenth of its bound. */
  private afterWrite(queue: string, written: number, now: number, config: QueueConfig): void {
    const since = (this.sinceTrim.get(queue) ?? 0) + written;
    if (since < Math.min(TRIM_EVERY, Math.ceil(config.eventsMaxCount / 10))) this.sinceTrim.set(queue, since);
    else this.trim(queue, config, now);
  }

  /**
   * Adds a list to `into` (the newest row), or as the queue's next row after `last` when `into` is undefined.
   * Returns the newest row as it now is.
   */
  private addList(
    queue: string,
    into: Newest | undefined,
    text: string,
    count: number,
    at: number,
    last: Newest | undefined = into,
  ): Newest {
    if (into !== undefined) {
      this.sql.extend.run(text, count, at, into.id);
      return { ...into, count: into.count + count, bytes: into.bytes + text.length };
    }
    const seq = last === undefined ? 1 : last.seq + last.count;
    const id = Number(this.sql.insert.run(queue, seq, at, count, text).lastInsertRowid);
    return { id, seq, count, bytes: text.length, json: 0 };
  }

  /** Moves the buffer where its cursors say, timed as its newest event; returns the newest row as it now is. */
  private moveBuffer(queue: string, buffered: Buffered, newest: Newest | undefined): Newest {
    const at = decodeEvents(buffered.text).at(-1)?.[4] ?? 0;
    const into = newest !== undefined && continuesRow(newest) ? newest : undefined;
    const moved = this.addList(queue, into, buffered.text, buffered.count, at, newest);
    this.sql.setBuffer.run('', 0, queue);
    return moved;
  }

  /** Moves the queue's buffered events to their row, so trimming sees them. */
  private flush(queue: string): void {
    const buffered = this.buffered(queue);
    if (buffered === undefined || buffered.count === 0) return;
    this.moveBuffer(queue, buffered, this.newestRow(queue));
  }

  private newestRow(queue: string): Newest | undefined {
    return this.sql.newest.get(queue) as Newest | undefined;
  }

  /** Where the buffer's events read (and go): on in the newest row, or as the next one. */
  private bufferBase(queue: string): BufferBase {
    const newest = this.newestRow(queue);
    if (newest === undefined) return [1, 0];
    return continuesRow(newest) ? [newest.seq, newest.count] : [newest.seq + newest.count, 0];
  }

  private buffered(queue: string): Buffered | undefined {
    return this.sql.buffered.get(queue) as Buffered | undefined;
  }

  /** Trims the queue's events past its count and age bounds, and marks the last one trimmed. */
  trim(queue: string, config: QueueConfig, now: number): void {
    this.sinceTrim.set(queue, 0);
    // The buffer holds the newest events: it moves to its row first only when a bound may reach into it.
    let buffered = this.buffered(queue)?.count ?? 0;
    if (buffered >= config.eventsMaxCount) {
      this.flush(queue);
      buffered = 0;
    }
    let byAge = this.sql.keepByAge.get(queue, now - config.eventsMaxAgeMs) as number | undefined;
    if (byAge === undefined && buffered > 0) {
      this.flush(queue);
      buffered = 0;
      byAge = this.sql.keepByAge.get(queue, now - config.eventsMaxAgeMs) as number | undefined;
    }
    if (byAge === undefined) {
      this.empty(queue);
      return;
    }
    let keepFrom = byAge;
    let mark: Position | null = null;
    const cut = later(
      this.ageCut(queue, byAge, now - config.eventsMaxAgeMs),
      this.countCut(queue, config.eventsMaxCount, buffered),
    );
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
    const newest = this.newestRow(queue);
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
      const list = rowEvents(row);
      const start = from !== null && row.seq === from[0] ? Math.max(row.first, from[1] + 1) : row.first;
      for (let index = start; index < row.count && events.length < limit; index++) {
        const listed = list[index];
        if (listed !== undefined) events.push(toEvent(row.seq, index, listed));
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

  /** Adds the buffered events after `from` to the page, read where they will go (bufferBase). */
  private readBuffer(queue: string, from: Position | null, limit: number, events: StoredEvent[]): void {
    const buffered = this.buffered(queue);
    if (buffered === undefined || buffered.count === 0) return;
    const [seq, offset] = this.bufferBase(queue);
    if (from !== null && from[0] > seq) return;
    const start = from?.[0] === seq ? Math.max(0, from[1] + 1 - offset) : 0;
    const list = decodeEvents(buffered.text);
    for (let k = start; k < buffered.count && events.length < limit; k++) {
      const listed = list[k];
      if (listed !== undefined) events.push(toEvent(seq, offset + k, listed));
    }
  }

  head(queue: string): string {
    const buffered = this.buffered(queue);
    if (buffered !== undefined && buffered.count > 0) {
      const [seq, offset] = this.bufferBase(queue);
      return cursorOf([seq, offset + buffered.count - 1]);
    }
    const newest = this.newestRow(queue);
    return cursorOf(newest === undefined ? this.trimmedMark(queue) : [newest.seq, newest.count - 1]);
  }

  /**
   * The oldest row to keep by count (`buffered` events past the newest row, fewer than `max`) and the index to
   * keep from in it; null: all fit. Rows written before seqs
   * were positions (numbered 1, 2, 3, ...) hold more events than their seqs say: while the cut falls among
   * them, more than `max` are kept, until the age bound or newer events move it past them.
   */
  private countCut(queue: string, max: number, buffered: number): Cut | null {
    const newest = this.newestRow(queue);
    if (newest === undefined) return null;
    // Buffered events are numbered on from the newest row, wherever they will go.
    const from = newest.seq + newest.count + buffered - max;
    const row = this.sql.holding.get(queue, from) as { seq: number; first: number; count: number } | undefined;
    if (row === undefined) return null;
    return { seq: row.seq, first: Math.min(from - row.seq, row.count), keptFrom: row.first };
  }

  /**
   * Where the age bound cuts the oldest row it keeps (`seq`): a row is kept while its newest event is, and one
   * grows to a few hundred events, so its events past the bound are trimmed within it.
   */
  private ageCut(queue: string, seq: number, bound: number): Cut | null {
    const row = this.sql.row.get(queue, seq) as EventRow | undefined;
    if (row === undefined) return null;
    // Nearly always all of it is younger than the bound: its first time record says so without decoding it.
    if ((firstTime(row.events) ?? -Infinity) > bound) return null;
    const list = rowEvents(row);
    let first = row.first;
    while (first < row.count && (list[first]?.[4] ?? Infinity) <= bound) first++;
    return { seq, first, keptFrom: row.first };
  }

  private trimmedMark(queue: string): Position {
    const row = this.sql.trimmed.get(queue) as { seq: number; index: number } | undefined;
    return row === undefined ? [0, 0] : [row.seq, row.index];
  }

  private markTrimmed(queue: string, [seq, index]: Position): void {
    this.sql.markTrimmed.run({ queue, seq, index });
  }
}

function toEvent(seq: number, index: number, [code, id, attempt, error, at]: DecodedEvent): StoredEvent {
  const base = {
    type: QUEUE_EVENT_TYPES[code] ?? 'enqueued',
    id,
    at,
    attempt,
    cursor: cursorOf([seq, index]),
  };
  return error === null ? base : { ...base, error };
}

/** A row's events: a JSON list if written before schema 7 (events without a time take the row's). */
function rowEvents(row: EventRow): DecodedEvent[] {
  if (!row.events.startsWith('[')) return decodeEvents(row.events);
  return (JSON.parse(row.events) as ListedEvent[]).map(([code, id, attempt, error, at]) => [
    code,
    id,
    attempt,
    error ?? null,
    at ?? row.at,
  ]);
}

/** The cut that trims more. */
function later(a: Cut | null, b: Cut | null): Cut | null {
  if (a === null || b === null) return a ?? b;
  return a.seq > b.seq || (a.seq === b.seq && a.first > b.first) ? a : b;
}

/** True when the buffer continues the row: one in the compact text with room for a whole buffer. */
function continuesRow(row: Newest): boolean {
  return row.json === 0 && row.bytes <= CONTINUE_CHARS;
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
