/**
 * The enqueue inside a caller's own transaction: the same `enqueue_messages` call as every enqueue
 * (enqueue.ts), sent through the caller's connection, so the rows, the counters and the NOTIFY that wakes
 * workers commit or roll back with the caller's work. kvmq never ends that transaction.
 */
import { TransactionError } from '../../model/errors.js';
import { enqueueMessages } from './enqueue.js';
import { translatePgError } from './translate-error.js';
import type { Queryable } from './queryable.js';
import type { NewMessage } from '../contract/contract.js';
import type { EnqueueResult, SqlTransaction } from '../../model/types.js';

// SQLSTATE in_failed_sql_transaction: an earlier statement failed, the server ignores all but ROLLBACK.
const ABORTED = '25P02';

export async function enqueueInCallerTransaction(
  tx: SqlTransaction,
  schema: string,
  queue: string,
  messages: readonly NewMessage[],
  where: string,
): Promise<EnqueueResult[]> {
  checkOpen(tx);
  // The statement reads only the rows' fields by name: any executor that returns { rows } will do.
  const db = { query: (text: string, values: unknown[]) => tx.query(text, values) } as unknown as Queryable;
  try {
    return await enqueueMessages(db, schema, queue, messages);
  } catch (error) {
    if ((error as { code?: unknown } | null)?.code === ABORTED) throw abortedError(error);
    throw translatePgError(error, where);
  }
}

/**
 * A `pg` client says where it stands (the server's transaction status of its last answer): idle is no
 * transaction at all, where the enqueue would commit on its own; failed is an aborted one. Other executors
 * are trusted, and an aborted transaction is told by the server's answer.
 */
function checkOpen(tx: SqlTransaction): void {
  const status = (tx as { getTransactionStatus?: () => unknown }).getTransactionStatus?.();
  if (status === 'I') {
    throw new TransactionError(
      'the tx given to enqueue is not inside a transaction: run BEGIN on that client first ' +
        '(the message would otherwise be committed at once, whatever happens to your work)',
    );
  }
  if (status === 'E') throw abortedError(undefined);
}

function abortedError(cause: unknown): TransactionError {
  return new TransactionError(
    'the tx given to enqueue is an aborted transaction (an earlier statement failed): nothing was enqueued; ' +
      'roll it back and start again',
    cause,
  );
}
