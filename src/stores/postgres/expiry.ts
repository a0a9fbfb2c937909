/** The GC's sweep of waiting messages whose time to live ended (EnqueueOptions.expireAfterMs). */
import { EXPIRED_ERROR } from '../../model/policy.js';
import { failMessage, type FailingRow } from './failures.js';
import { EXPIRE_AT_SQL, EXPIRING_SQL } from './schema.js';
import type { WriteContext } from './tx.js';

/**
 * Fails (or dead-letters) at most `limit` waiting messages never handed out whose deadline has passed, in the
 * caller's transaction, each with a `failed` event saying `expired`; returns how many. Reads the expiry index.
 */
export async function expireWaiting(tx: WriteContext, limit: number): Promise<number> {
  const { rows } = await tx.db.query<FailingRow>(
    `SELECT seq, id, filters, attempt, parent_wait FROM ${tx.s}.messages
     WHERE queue = $1 AND ${EXPIRING_SQL} AND ${EXPIRE_AT_SQL} <= $2 AND attempt = 0
     LIMIT $3 FOR UPDATE SKIP LOCKED`,
    [tx.queue, tx.now, limit],
  );
  for (const row of rows) await failMessage(tx, row, EXPIRED_ERROR, null);
  return rows.length;
}
