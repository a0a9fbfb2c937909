/**
 * Listing by state from the partial indexes: each state is one or more range
 * reads, ordered by (index time, seq), so a page costs what it returns (times
 * the ranges of (filter class, priority), for pending states, whose index leads with them).
 */
import { makeCursor, readCursor, type ListQuery } from '../model/list.js';
import { contentOf, statusOf, type ContentRow, type StatusRow } from './inspect.js';
import { stateOf } from './state.js';
import type { PendingRange } from './pending.js';
import { CONTENT_FIELDS, STATUS_FIELDS, type Statement } from './statements.js';
import type BetterSqlite3 from 'better-sqlite3';
import type { StoredListing, StoredPage } from '../store/contract.js';
import type { MessageState } from '../model/types.js';

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
};

type ListRow = StatusRow & Partial<ContentRow> & { readonly t: number };

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
    const start = this.start(query);
    const messages: StoredListing[] = [];
    let last: Position | null = null;
    for (let i = start.state; i < query.states.length && messages.length < query.limit; i++) {
      const state = query.states[i] as MessageState;
      const after = i === start.state ? start : { t: -1, seq: -1 };
      const want = query.limit - messages.length;
      const rows: ListRow[] = [];
      for (const source of SOURCES[state]) {
        const params = { queue, now, t: after.t, seq: after.seq, outcome: query.outcome, limit: want };
        const statement = this.statement(source, query.payload);
        for (const range of source.perRange ? ranges : [null]) {
          rows.push(...(statement.all(range === null ? params : { ...params, ...range }) as ListRow[]));
        }
      }
      rows.sort((a, b) => a.t - b.t || a.seq - b.seq);
      for (const row of rows.slice(0, want)) {
        // The sources mirror stateOf; a row reading otherwise would be a bug, never listed under a wrong state.
        if (stateOf(row, now) !== state) throw new Error(`list: ${row.id} read as ${stateOf(row, now)}, not ${state}`);
        messages.push({
          status: statusOf(queue, row, now),
          content: query.payload ? contentOf(row as ContentRow) : null,
        });
        last = { state: i, t: row.t, seq: row.seq };
      }
    }
    const cursor =
      messages.length === query.limit && last !== null
        ? makeCursor(query, [query.states[last.state] as string, String(last.t), String(last.seq)])
        : null;
    return { messages, cursor };
  }

  private start(query: ListQuery): Position {
    const position = readCursor(query, 3);
    if (position === null) return { state: 0, t: -1, seq: -1 };
    const [state, t, seq] = position.map((part, i) => (i === 0 ? part : Number(part)));
    const index = query.states.indexOf(state as MessageState);
    if (index < 0 || !Number.isSafeInteger(t) || !Number.isSafeInteger(seq)) {
      throw new TypeError('cursor is not one a previous page of this listing returned (same states and outcome)');
    }
    return { state: index, t: t as number, seq: seq as number };
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
