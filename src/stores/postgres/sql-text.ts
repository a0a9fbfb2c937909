/** Pieces of SQL text the schema and the store build statements from. */

/** Counter rows per queue: writers on different connections update different rows (schema.ts `counts`). */
export const COUNT_SLOTS = 16;

/** The counter slot of the connection running the statement. */
export const COUNT_SLOTS_SQL = `(pg_backend_pid() % ${COUNT_SLOTS})`;

/** A name as a quoted SQL identifier. */
export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/** A string as an SQL literal. */
export function quoteLiteral(text: string): string {
  return `'${text.replace(/'/g, "''")}'`;
}
