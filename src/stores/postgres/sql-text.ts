/** Pieces of SQL text the schema and the store build statements from. */

/** Counter rows per queue: writers on different connections update different rows (schema.ts `counts`). */
export const COUNT_SLOTS = 16;

/** The counter slot of the connection running the statement. */
export const COUNT_SLOTS_SQL = `(pg_backend_pid() % ${COUNT_SLOTS})`;

/**
 * The hot functions' planning (finish_and_claim, enqueue_messages, and what they call): each statement planned
 * once per session and kept. PostgreSQL otherwise plans a statement with its values every call when it guesses
 * the kept plan dearer, which it did here: about a third of a message's 1.5 ms (p50) at 500 a second, and two
 * thirds of a worker's rate at concurrency 1,000. A statement whose generic plan is poor runs by EXECUTE.
 */
export const GENERIC_PLANS = 'SET plan_cache_mode = force_generic_plan';

/**
 * Rows `m` of a batch `u` (id, attempt) that `consumer` still holds at that attempt: what a finish or a lock's
 * extension is fenced by. `queue` and `consumer` are placeholders or variables.
 */
export function heldAttemptSql(m: string, queue: string, consumer: string): string {
  return `${m}.queue = ${queue} AND ${m}.id = u.id AND ${m}.phase = 1 AND ${m}.consumer = ${consumer}
    AND ${m}.attempt = u.attempt`;
}

/** A name as a quoted SQL identifier. */
export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/** A string as an SQL literal. */
export function quoteLiteral(text: string): string {
  return `'${text.replace(/'/g, "''")}'`;
}
