/** What happens to a message that fails: it stays `failed` in its queue, or moves to the dead-letter queue. */
import { childFailed } from './flows.js';
import type { WriteContext } from './tx.js';

export { historyWith } from '../sqlite/failures.js';

/** A locked message that fails, as the store read it. */
export interface FailingRow {
  readonly seq: number;
  readonly id: string;
  readonly filters: string;
  readonly attempt: number;
  /** 1 while a flow's parent waits for this message (flows.ts). */
  readonly parent_wait: number;
}

/**
 * Fails a locked message in the caller's transaction: with a dead-letter queue configured and the id free
 * there, the row moves to it, queued now at attempt 0 with its content, policy and history; otherwise it
 * becomes `failed`. `history` is the new history JSON, or null to keep the stored one. Either way the queue's
 * event is `failed`; the dead-letter queue's, `enqueued`.
 */
export async function failMessage(
  tx: WriteContext,
  row: FailingRow,
  error: string | null,
  history: string | null,
): Promise<void> {
  const { db, s, now } = tx;
  const dlq = tx.config.deadLetterQueue;
  tx.event('failed', row.id, row.attempt, error);
  // A flow's child ends for its parent here, before the row moves.
  if (row.parent_wait === 1) await childFailed(tx, row.seq, error);
  if (dlq !== null) {
    const moved = await db.query(
      `WITH q AS (INSERT INTO ${s}.queues (queue) VALUES ($2) ON CONFLICT DO NOTHING),
         c AS (INSERT INTO ${s}.classes (queue, filters) VALUES ($2, $6) ON CONFLICT DO NOTHING)
       UPDATE ${s}.messages SET queue = $2, phase = 0, ready_at = $3, lock_until = 0, consumer = NULL,
         backoff_until = 0, requeue = 0, next_payload = NULL, next_encoding = NULL, attempt = 0, losses = 0,
         debounce_id = NULL, outcome = 'error', last_error = $4, history = coalesce($5, history), updated_at = $3
       WHERE seq = $1 AND NOT EXISTS (SELECT 1 FROM ${s}.messages x WHERE x.queue = $2 AND x.id = $7)`,
      [row.seq, dlq, now, error, history, row.filters, row.id],
    );
    if (moved.rowCount === 1) {
      tx.count(-1, 0, 0);
      tx.count(1, 0, 0, dlq);
      tx.event('enqueued', row.id, 0, null, dlq);
      tx.wake(dlq);
      return;
    }
  }
  await db.query(
    `UPDATE ${s}.messages SET phase = 3, lock_until = 0, consumer = NULL, backoff_until = 0, requeue = 0,
       next_payload = NULL, next_encoding = NULL, outcome = 'error', last_error = $2,
       history = coalesce($3, history), updated_at = $4
     WHERE seq = $1`,
    [row.seq, error, history, now],
  );
  tx.count(-1, 0, 1);
}
