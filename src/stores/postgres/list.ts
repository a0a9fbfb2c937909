/**
 * Listing by state from the partial indexes, as on SQLite (src/stores/sqlite/list.ts): each state is one or more
 * range reads ordered by (index time, seq), so a page costs what it returns (times the ranges of (filter
 * class, priority), for pending states, whose index leads with them). Run in one snapshot.
 */
import type { ListQuery } from '../../model/list.js';
// Rows, cursors and the walk over states are SQLite's: one statement of them for both stores.
import { PageBuilder, type ListRow } from '../sqlite/list.js';
import { CONTENT_FIELDS, STATUS_FIELDS } from './inspect.js';
import { pendingRanges } from './ranges.js';
import type { Queryable } from './queryable.js';
import type { StoredPage } from '../contract/contract.js';
import type { MessageState } from '../../model/types.js';

/** One range read: rows where `where` holds, ordered by (`time`, seq). */
interface Source {
  readonly where: string;
  readonly time: string;
  /** The pending index leads with the filter class and priority: one read per range of them. */
  readonly perRange?: true;
}

const PENDING = { time: 'ready_at', perRange: true } as const;
const LOCKED = { time: 'lock_until' } as const;

const SOURCES: Readonly<Record<MessageState, readonly Source[]>> = {
  // Ready rows, and rows whose lock expired (each from when it became takeable).
  queued: [
    { ...PENDING, where: 'phase = 0 AND ready_at <= @now' },
    { ...LOCKED, where: 'phase = 1 AND lock_until <= @now' },
  ],
  'queued-with-backoff': [{ ...PENDING, where: 'phase = 0 AND ready_at > @now AND requeue = 0' }],
  locked: [{ ...LOCKED, where: 'phase = 1 AND lock_until > @now AND requeue = 0' }],
  'locked-with-requeue': [{ ...LOCKED, where: 'phase = 1 AND lock_until > @now AND requeue = 1' }],
  'done-awaiting-gc': [{ where: 'phase = 2 AND backoff_until <= @now', time: 'updated_at' }],
  'done-with-backoff': [{ where: 'phase = 2 AND backoff_until > 0 AND backoff_until > @now', time: 'backoff_until' }],
  'done-with-requeue': [{ ...PENDING, where: 'phase = 0 AND ready_at > @now AND requeue = 1' }],
  failed: [{ where: 'phase = 3', time: 'updated_at' }],
  // Flow parents by when they began to wait (the messages_waiting index).
  'waiting-children': [{ where: 'phase = 4', time: 'updated_at' }],
};

/** A page of the query; the caller runs it in a read-only snapshot, so every range read sees one state. */
export async function listPage(db: Queryable, s: string, queue: string, query: ListQuery): Promise<StoredPage> {
  const now = Date.now();
  const classes = (
    await db.query<{ filters: string }>(`SELECT filters FROM ${s}.classes WHERE queue = $1`, [queue])
  ).rows.map((r) => r.filters);
  const page = new PageBuilder(queue, query, now);
  for (const { state, after, want } of page.steps()) {
    const rows: ListRow[] = [];
    for (const source of SOURCES[state]) {
      const values = { queue, now, t: after.t, seq: after.seq, outcome: query.outcome ?? null, limit: want, classes };
      const { text, params } = bind(statement(s, source, query.payload), values);
      rows.push(...(await db.query<ListRow>(text, params)).rows);
    }
    page.add(rows);
  }
  return page.page();
}

/** The statement of one source, with named parameters (@name; bind() numbers them). */
function statement(s: string, source: Source, payload: boolean): string {
  const fields = payload ? `${STATUS_FIELDS}, ${CONTENT_FIELDS}` : STATUS_FIELDS;
  const where = `${source.where} AND (${source.time}, seq) > (@t, @seq) AND (@outcome::text IS NULL OR outcome = @outcome)`;
  if (source.perRange !== true) {
    return `SELECT ${fields}, ${source.time} AS t FROM ${s}.messages
      WHERE queue = @queue AND ${where} ORDER BY ${source.time}, seq LIMIT @limit`;
  }
  // The ranges prefix reads the queue as $1 and the classes as the parameter named here.
  return `${pendingRanges(s, '@classes')}
    SELECT x.* FROM ranges r CROSS JOIN LATERAL (
      SELECT ${fields}, ${source.time} AS t FROM ${s}.messages
      WHERE queue = @queue AND filters = r.filters AND priority = r.priority AND ${where}
      ORDER BY ${source.time}, seq LIMIT @limit) x
    ORDER BY x.t, x.seq LIMIT @limit`;
}

/** Numbers a statement's @names in order of first use ($1 is always the queue) and lists their values. */
function bind(text: string, values: Readonly<Record<string, unknown>>): { text: string; params: unknown[] } {
  const order = ['queue'];
  const numbered = text.replace(/\$1\b/g, '@queue').replace(/@([a-z]+)/g, (_, name: string) => {
    if (!order.includes(name)) order.push(name);
    return `$${order.indexOf(name) + 1}`;
  });
  return { text: numbered, params: order.map((name) => values[name]) };
}
