/** What happens to a message that fails: it stays `failed` in its queue, or moves to the dead-letter queue. */
import { appendHistory, parseHistory } from '../../model/history.js';
import { childEnded } from './flows.js';
import type { FailingRow, WriteContext } from './write-context.js';
import type { AttemptRecord } from '../../model/types.js';

export type { FailingRow, WriteContext } from './write-context.js';

/** The stored history with `record` appended, as JSON. */
export function historyWith(stored: string | null, record: AttemptRecord): string {
  return JSON.stringify(appendHistory(parseHistory(stored), record));
}

/**
 * Fails a locked message in the caller's transaction: with a dead-letter queue
 * configured and the id free there, the row moves to it, queued now at attempt
 * 0 with its content, policy and history; otherwise it becomes `failed`.
 * `history` is the new history JSON, or null to keep the stored one.
 * Either way the queue's event is `failed`; the dead-letter queue's, `enqueued`.
 */
export function failMessage(tx: WriteContext, row: FailingRow, error: string | null, history: string | null): void {
  const { sql, queue, now } = tx;
  const dlq = tx.config().deadLetterQueue;
  tx.event('failed', row.id, row.attempt, error);
  // A flow's child ends for its parent here, before the row moves.
  if (row.parent_wait === 1) childEnded(tx, row.seq, true, error);
  if (dlq !== null && sql.existing.get(dlq, row.id) === undefined) {
    sql.ensureQueue.run(dlq);
    sql.addClass.run(dlq, row.filters);
    sql.deadLetter.run({ seq: row.seq, dlq, error, history, now });
    sql.addCounts.run({ queue, size: -1, done: 0, failed: 0 });
    sql.addCounts.run({ queue: dlq, size: 1, done: 0, failed: 0 });
    tx.event('enqueued', row.id, 0, null, dlq);
    tx.wake(dlq);
    return;
  }
  sql.toFailed.run({ seq: row.seq, error, history, now });
  sql.addCounts.run({ queue, size: -1, done: 0, failed: 1 });
}
