/** What happens to a message that fails: it stays `failed` in its queue, or moves to the dead-letter queue. */
import { appendHistory, parseHistory } from '../model/history.js';
import type { Statements } from './statements.js';
import type { QueueEventType } from '../model/events.js';
import type { AttemptRecord, QueueConfig } from '../model/types.js';

/** The statements and context of one write transaction. */
export interface WriteContext {
  readonly sql: Statements;
  readonly queue: string;
  readonly now: number;
  /** The queue's configuration, read (once) inside the transaction. */
  readonly config: () => QueueConfig;
  /** Wakes a queue's workers once the transaction has committed. */
  readonly wake: (queue: string) => void;
  /** Records a queue event in this transaction, if the queue (default: this one) has events on. */
  readonly event: (type: QueueEventType, id: string, attempt: number, error?: string | null, queue?: string) => void;
  /**
   * Adds to this queue's `size` and `done` counters at the transaction's end, in the statement that appends its
   * events when it has any (one write of the queue row, not two).
   */
  readonly count: (size: number, done: number) => void;
}

/** A locked message that fails, as the store read it. */
export interface FailingRow {
  readonly seq: number;
  readonly id: string;
  readonly filters: string;
  readonly attempt: number;
}

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
