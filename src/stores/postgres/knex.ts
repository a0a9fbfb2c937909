/**
 * A Knex transaction as the `tx` of an enqueue. Knex's raw queries take `?` placeholders, kvmq's statements
 * PostgreSQL's `$1`: each `$n` becomes a `?` with its value in that place, and a `?` of the text itself is
 * escaped, so Knex binds exactly kvmq's values. Structural, so kvmq needs no Knex of its own.
 */
import type { SqlTransaction } from '../../model/types.js';

/** What kvmq uses of a Knex transaction (or of a Knex instance, to run outside one). */
export interface KnexRaw {
  raw(sql: string, bindings: readonly unknown[]): PromiseLike<unknown>;
}

export function knexTransaction(trx: KnexRaw): SqlTransaction {
  if (typeof (trx as Partial<KnexRaw> | null)?.raw !== 'function') {
    throw new TypeError('knexTransaction takes a Knex transaction (from knex.transaction())');
  }
  return {
    async query(text, values) {
      const bindings: unknown[] = [];
      const sql = text.replace(/\?|\$(\d+)/g, (match, n: string | undefined) => {
        if (n === undefined) return '\\?';
        bindings.push(values[Number(n) - 1]);
        return '?';
      });
      // On PostgreSQL, Knex answers a raw query with the driver's result, rows and all.
      return (await trx.raw(sql, bindings)) as { rows: unknown[] };
    },
  };
}
