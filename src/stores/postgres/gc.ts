/**
 * The PostgreSQL store's GC of a queue: one GC at a time per queue (its row's gc lock), events trimmed, waiting
 * messages past their time to live failed (expiry.ts), then done and failed messages past their lifetimes or
 * beyond the newest kept deleted a chunk at a time, so a large GC never holds many row locks for long.
 */
import { trimEvents } from './events.js';
import { expireWaiting } from './expiry.js';
import type { PoolClient } from 'pg';
import type { WriteContext } from './tx.js';
import type { GcResult, QueueConfig } from '../../model/types.js';

// Rows GC deletes per statement.
const GC_CHUNK = 5000;
// A crashed GC's lock lapses after this.
const GC_LOCK_MS = 60_000;

/** What the GC needs of the store. */
export interface GcAccess {
  /** The quoted schema. */
  readonly s: string;
  config(queue: string): Promise<QueueConfig>;
  write<T>(queue: string, fn: (tx: WriteContext) => Promise<T>): Promise<T>;
  withClient<T>(fn: (client: PoolClient) => Promise<T>): Promise<T>;
}

export async function runGc(store: GcAccess, queue: string, force: boolean): Promise<GcResult> {
  const { s } = store;
  const config = await store.config(queue);
  const took = await store.write(queue, async (tx) => {
    const taken = await tx.db.query(
      `UPDATE ${s}.queues SET gc_lock_until = $2, gc_at = $3
       WHERE queue = $1 AND gc_lock_until <= $3 AND ($4 OR gc_at + $5 <= $3)`,
      [queue, tx.now + GC_LOCK_MS, tx.now, force, config.gcIntervalMs],
    );
    return taken.rowCount === 1;
  });
  if (!took) return { ran: false, removed: 0 };
  let removed = 0;
  try {
    await store.withClient((client) => trimEvents(client, s, queue, config, Date.now()));
    // Expired messages first: one failed now is removed with the failed ones once past its lifetime.
    while ((await store.write(queue, (tx) => expireWaiting(tx, GC_CHUNK))) === GC_CHUNK);
    removed += await gcChunks(store, queue, 2, config.gcLifetimeMs, null);
    removed += await gcChunks(store, queue, 3, config.failedLifetimeMs, null);
    if (config.keepDone !== null) removed += await gcChunks(store, queue, 2, 0, config.keepDone);
    if (config.keepFailed !== null) removed += await gcChunks(store, queue, 3, 0, config.keepFailed);
    await store.withClient(async (client) => {
      const now = Date.now();
      await client.query(`DELETE FROM ${s}.consumers WHERE queue = $1 AND expires_at <= $2`, [queue, now]);
      // A group whose next start has come is as one never charged (no row): its row goes.
      await client.query(`DELETE FROM ${s}.group_rates WHERE queue = $1 AND tat <= $2`, [queue, now]);
    });
  } finally {
    await store.withClient((client) =>
      client.query(`UPDATE ${s}.queues SET gc_lock_until = 0 WHERE queue = $1`, [queue]),
    );
  }
  return { ran: true, removed };
}

/**
 * Deletes, a chunk at a time, the done (phase 2) or failed (3) messages finished `lifetimeMs` ago, or with
 * `keep`, those finished before the newest `keep`; a success still refusing duplicates stays. Returns how many.
 */
async function gcChunks(
  store: GcAccess,
  queue: string,
  phase: 2 | 3,
  lifetimeMs: number,
  keep: number | null,
): Promise<number> {
  const { s } = store;
  const doomed =
    keep === null
      ? `SELECT seq FROM ${s}.messages
         WHERE queue = $1 AND phase = $2 AND updated_at <= $3 AND ($2 = 3 OR backoff_until <= $4)
         ORDER BY updated_at LIMIT $5 FOR UPDATE SKIP LOCKED`
      : `SELECT seq FROM (SELECT seq, backoff_until FROM ${s}.messages WHERE queue = $1 AND phase = $2
           ORDER BY updated_at DESC, seq DESC OFFSET $5) beyond
         WHERE $2 = 3 OR backoff_until <= $3 LIMIT $4`;
  let removed = 0;
  for (;;) {
    const deleted = await store.withClient(async (client) => {
      const now = Date.now();
      const { rows } = await client.query<{ n: number }>(
        `WITH gone AS (DELETE FROM ${s}.messages WHERE seq IN (${doomed}) RETURNING 1),
         n AS (SELECT count(*) AS n FROM gone)
         SELECT n.n, CASE WHEN n.n > 0 THEN ${s}.add_counts($1, 0, CASE WHEN $2 = 2 THEN -n.n ELSE 0 END,
           CASE WHEN $2 = 3 THEN -n.n ELSE 0 END) END AS counted FROM n`,
        keep === null ? [queue, phase, now - lifetimeMs, now, GC_CHUNK] : [queue, phase, now, GC_CHUNK, keep],
      );
      return rows[0]?.n ?? 0;
    });
    removed += deleted;
    if (deleted < GC_CHUNK) return removed;
  }
}
