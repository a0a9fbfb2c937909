/**
 * Statements over many rows at once: one call per chunk of rows instead of
 * one per message, which is most of the cost of a batch. Each statement is
 * built for a row count, prepared once, and returns one value per row it
 * touched (a RETURNING column).
 */
import type BetterSqlite3 from 'better-sqlite3';

const CHUNK = 64;

/** `prefix` binds the statement's leading parameters, the same for every chunk. */
export type ChunkedStatement = (prefix: readonly unknown[], rows: readonly (readonly unknown[])[]) => unknown[];

/**
 * `values` orders a chunk's parameters as its statement takes them: the prefix, then the rows, unless a
 * statement needs some of the prefix after them.
 */
export function chunked(
  db: BetterSqlite3.Database,
  sqlFor: (rowCount: number) => string,
  values: (prefix: readonly unknown[], rows: unknown[]) => unknown[] = (prefix, rows) => [...prefix, ...rows],
): ChunkedStatement {
  const prepared = new Map<number, BetterSqlite3.Statement>();
  const statement = (count: number): BetterSqlite3.Statement => {
    let s = prepared.get(count);
    if (s === undefined) {
      s = db.prepare(sqlFor(count)).pluck();
      prepared.set(count, s);
    }
    return s;
  };
  return (prefix, rows) => {
    const out: unknown[] = [];
    for (let i = 0; i < rows.length; i += CHUNK) {
      const chunk = rows.slice(i, i + CHUNK);
      out.push(...statement(chunk.length).all(...values(prefix, chunk.flat())));
    }
    return out;
  };
}

function placeholders(count: number, row: string): string {
  return Array.from({ length: count }, () => row).join(', ');
}

const INSERT_COLUMNS =
  'queue, id, payload, encoding, metadata, filters, phase, ready_at, enqueued_at, updated_at, policy';

/** The inserts of new messages; each returns the ids inserted (an id that exists is left alone). */
export interface MessageInserts {
  /**
   * Rows of (queue, id, payload, encoding, metadata, filters, ready_at, enqueued_at, updated_at, policy), for
   * messages with priority 0, no group and no debounce id: the columns' defaults, so nothing more is bound.
   */
  readonly plain: ChunkedStatement;
  /** The same rows followed by priority, group_name and debounce_id. */
  readonly scheduled: ChunkedStatement;
}

export function insertMessages(db: BetterSqlite3.Database): MessageInserts {
  const conflict = 'ON CONFLICT (queue, id) DO NOTHING RETURNING id';
  return {
    plain: chunked(
      db,
      (n) =>
        `INSERT INTO kvmq_messages (${INSERT_COLUMNS}) ` +
        `VALUES ${placeholders(n, '(?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?)')} ${conflict}`,
    ),
    scheduled: chunked(
      db,
      (n) =>
        `INSERT INTO kvmq_messages (${INSERT_COLUMNS}, priority, group_name, debounce_id) ` +
        `VALUES ${placeholders(n, '(?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?)')} ${conflict}`,
    ),
  };
}

/**
 * Prefix (now, queue, consumer), rows of (id, attempt): marks plain successes done,
 * only where that consumer holds that attempt and no requeue waits; returns the ids done. A flow's child whose
 * parent waits (parent_wait) is left to the one-by-one finish, which counts it for the parent (flows.ts).
 */
export function finishSuccesses(db: BetterSqlite3.Database): ChunkedStatement {
  return chunked(
    db,
    (n) =>
      `UPDATE kvmq_messages SET phase = 2, lock_until = 0, consumer = NULL, backoff_until = 0, outcome = 'success',
         last_error = NULL, updated_at = ?
       WHERE queue = ? AND phase = 1 AND consumer = ? AND requeue = 0 AND parent_wait = 0
         AND (id, attempt) IN (VALUES ${placeholders(n, '(?, ?)')})
       RETURNING id`,
  );
}

/**
 * Prefix (queue, consumer), rows of (id, attempt): as finishSuccesses, for a queue that keeps no successes
 * (keepDone 0): removes them (their reports go by trigger) instead of marking them done; returns the ids removed.
 * A flow's child stays, for its parent to read (job.children()), and goes to the one-by-one finish.
 */
export function removeSuccesses(db: BetterSqlite3.Database): ChunkedStatement {
  return chunked(
    db,
    (n) =>
      `DELETE FROM kvmq_messages
       WHERE queue = ? AND phase = 1 AND consumer = ? AND requeue = 0 AND parent_seq IS NULL
         AND (id, attempt) IN (VALUES ${placeholders(n, '(?, ?)')})
       RETURNING id`,
  );
}

/**
 * Prefix (now, queue, consumer), rows of (id, attempt, result, result_encoding): as finishSuccesses, for
 * successes that keep a result, each written with its own (looked up in the rows: at most a chunk's); returns
 * the ids done. Matched as finishSuccesses matches, so each row finds its message by the (queue, id) index.
 */
export function finishResults(db: BetterSqlite3.Database): ChunkedStatement {
  return chunked(
    db,
    (n) =>
      `WITH v(id, attempt, result, encoding) AS MATERIALIZED (VALUES ${placeholders(n, '(?, ?, ?, ?)')})
       UPDATE kvmq_messages SET phase = 2, lock_until = 0, consumer = NULL, backoff_until = 0, outcome = 'success',
         last_error = NULL, updated_at = ?,
         (result, result_encoding) = (SELECT result, encoding FROM v WHERE v.id = kvmq_messages.id)
       WHERE queue = ? AND phase = 1 AND consumer = ? AND requeue = 0 AND parent_wait = 0
         AND (id, attempt) IN (SELECT id, attempt FROM v)
       RETURNING id`,
    // The rows come first, in the WITH.
    (prefix, rows) => [...rows, ...prefix],
  );
}
