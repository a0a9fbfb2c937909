/**
 * Listing by state from the partial indexes: each state is one or more range
 * reads, ordered by (index time, seq), so a page costs what it returns (times
 * the ranges of (filter class, priority), for pending states, whose index leads with them).
 */
import { makeCursor, readCursor, type ListQuery } from '../../model/list.js';
import { contentOf, statusOf, type ContentRow, type StatusRow } from './inspect.js';
import { stateOf } from './state.js';
import type { PendingRange } from './pending.js';
import { CONTENT_FIELDS, STATUS_FIELDS, type Statement } from './statements.js';
import type BetterSqlite3 from 'better-sqlite3';
import type { StoredListing, StoredPage } from '../contract/contract.js';
import type { MessageState } from '../../model/types.js';

/** One range read: rows of the state in `index`, where `where` holds, ordered by (`time`, seq). */
interface Source {
  readonly index: string;
  readonly where: string;
  readonly time: string;
  /** The index leads with the filter class and priority: one read per range of them. */
  readonly perRange?: true;
}

const PENDING = { index: 'kvmq_messages_pending', time: 'ready_at', perRange: true } as const;
const IN_RANGE = 'phase = 0 AND filters = @filters AND priority = @priority';
const LOCKED = { index: 'kvmq_messages_locked', time: 'lock_until' } as const;

const SOURCES: Readonly<Record<MessageState, readonly Source[]>> = {
  // Ready rows, and rows whose lock expired (each from when it became takeable).
  queued: [
    { ...PENDING, where: `${IN_RANGE} AND ready_at <= @now` },
    { ...LOCKED, where: 'phase = 1 AND lock_until <= @now' },
  ],
  'queued-with-backoff': [{ ...PENDING, where: `${IN_RANGE} AND ready_at > @now AND requeue = 0` }],
  locked: [{ ...LOCKED, where: 'phase = 1 AND lock_until > @now AND requeue = 0' }],
  'locked-with-requeue': [{ ...LOCKED, where: 'phase = 1 AND lock_until > @now AND requeue = 1' }],
  // By finish time; the few rows still in a duplicate backoff are skipped.
  'done-awaiting-gc': [
    { index: 'kvmq_messages_done', where: 'phase = 2 AND backoff_until <= @now', time: 'updated_at' },
  ],
  // By the end of the backoff, on the index that holds only rows finished with one.
  'done-with-backoff': [
    {
      index: 'kvmq_messages_backoff',
      where: 'phase = 2 AND backoff_until > 0 AND backoff_until > @now',
      time: 'backoff_until',
    },
  ],
  'done-with-requeue': [{ ...PENDING, where: `${IN_RANGE} AND ready_at > @now AND requeue = 1` }],
  failed: [{ index: 'kvmq_messages_failed', where: 'phase = 3', time: 'updated_at' }],
  // Flow parents by when they began to wait.
  'waiting-children': [{ index: 'kvmq_messages_waiting', where: 'phase = 4', time: 'updated_at' }],
};

/** A listed row: its status, its content when asked for, and its index time. */
export type ListRow = StatusRow & Partial<ContentRow> & { readonly t: number };

/** Where a page ended: the state, and the (time, seq) of its last row. */
interface Position {
  readonly state: number;
  readonly t: number;
  readonly seq: number;
}

export class Lister {
  private readonly statements = new Map<string, Statement>();

  constructor(private readonly db: BetterSqlite3.Database) {}

  /** A page of the query; the caller runs it in a read transaction, so every range read sees one snapshot. */
  page(queue: string, query: ListQuery, ranges: readonly PendingRange[], now: number): StoredPage {
    const page = new PageBuilder(queue, query, now);
    for (const { state, after, want } of page.steps()) {
      const rows: ListRow[] = [];
      for (const source of SOURCES[state]) {
        const params = { queue, now, t: after.t, seq: after.seq, outcome: query.outcome, limit: want };
        const statement = this.statement(source, query.payload);
        for (const range of source.perRange ? ranges : [null]) {
          rows.push(...(statement.all(range === null ? params : { ...params, ...range }) as ListRow[]));
        }
      }
      page.add(rows);
    }
    return page.page();
  }

  private statement(source: Source, payload: boolean): Statement {
    const key = `${source.index}|${source.where}|${payload}`;
    let statement = this.statements.get(key);
    if (statement === undefined) {
      const fields = payload ? `${STATUS_FIELDS}, ${CONTENT_FIELDS}` : STATUS_FIELDS;
      statement = this.db.prepare(
        `SELECT ${fields}, ${source.time} AS t FROM kvmq_messages INDEXED BY ${source.index}
         WHERE queue = @queue AND ${source.where} AND (${source.time}, seq) > (@t, @seq)
           AND (@outcome IS NULL OR outcome = @outcome)
         ORDER BY ${source.time}, seq LIMIT @limit`,
      );
      this.statements.set(key, statement);
    }
    return statement;
  }
}

/** One state's read of a listing: rows after (t, seq), at most `want`. */
export interface ListStep {
  readonly state: MessageState;
  readonly after: { readonly t: number; readonly seq: number };
  readonly want: number;
}

/**
 * A listing's walk over its states, from its cursor: steps() says what to read next, add() takes that state's
 * rows (from any number of range reads) in (time, seq) order up to the page's limit. Shared with the
 * PostgreSQL store, whose rows and cursors are the same.
 */
export class PageBuilder {
  private readonly messages: StoredListing[] = [];
  private last: Position | null = null;
  private current: { index: number; state: MessageState; want: number } | null = null;

  constructor(
    private readonly queue: string,
    private readonly query: ListQuery,
    private readonly now: number,
  ) {}

  *steps(): Generator<ListStep> {
    const start = startOf(this.query);
    const { states, limit } = this.query;
    for (let i = start.state; i < states.length && this.messages.length < limit; i++) {
      const state = states[i] as MessageState;
      const want = limit - this.messages.length;
      this.current = { index: i, state, want };
      yield { state, after: i === start.state ? start : { t: -1, seq: -1 }, want };
    }
  }

  add(rows: ListRow[]): void {
    if (this.current === null) throw new Error('list: rows added before a step');
    const { index, state, want } = this.current;
    rows.sort((a, b) => a.t - b.t || a.seq - b.seq);
    for (const row of rows.slice(0, want)) {
      // The sources mirror stateOf; a row reading otherwise would be a bug, never listed under a wrong state.
      const read = stateOf(row, this.now);
      if (read !== state) throw new Error(`list: ${row.id} read as ${read}, not ${state}`);
      this.messages.push({
        status: statusOf(this.queue, row, this.now),
        content: this.query.payload ? contentOf(row as ContentRow) : null,
      });
      this.last = { state: index, t: row.t, seq: row.seq };
    }
  }

  page(): StoredPage {
    const { last, messages, query } = this;
    const cursor =
      messages.length === query.limit && last !== null
        ? makeCursor(query, [query.states[last.state] as string, String(last.t), String(last.seq)])
        : null;
    return { messages, cursor };
  }
}

function startOf(query: ListQuery): Position {
  const position = readCursor(query, 3);
  if (position === null) return { state: 0, t: -1, seq: -1 };
  const [state, t, seq] = position.map((part, i) => (i === 0 ? part : Number(part)));
  const index = query.states.indexOf(state as MessageState);
  if (index < 0 || !Number.isSafeInteger(t) || !Number.isSafeInteger(seq)) {
    throw new TypeError('cursor is not one a previous page of this listing returned (same states and outcome)');
  }
  return { state: index, t: t as number, seq: seq as number };
}
