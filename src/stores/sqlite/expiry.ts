/** The GC's sweep of waiting messages whose time to live ended (EnqueueOptions.expireAfterMs). */
import { EXPIRED_ERROR } from '../../model/policy.js';
import { failMessage, type FailingRow, type WriteContext } from './failures.js';

/**
 * Fails (or dead-letters) at most `limit` waiting messages whose deadline has passed, in the caller's transaction,
 * each with a `failed` event saying `expired`; returns how many. Reads the expiry index only.
 */
export function expireWaiting(tx: WriteContext, limit: number): number {
  const rows = tx.sql.expiredWaiting.all({ queue: tx.queue, now: tx.now, limit }) as FailingRow[];
  for (const row of rows) failMessage(tx, row, EXPIRED_ERROR, null);
  return rows.length;
}
