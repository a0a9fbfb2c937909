/**
 * A handler's transaction (worker option `transactional`): a pooled connection inside BEGIN, handed to the
 * handler, then the message's finish written on it (finish.ts, the same statements as any finish) and one
 * COMMIT for both. A finish the store refuses as `lost` (the lock ended and another consumer may hold the
 * message) rolls the handler's writes back with it, so they never commit beside another worker's. A process
 * that dies with the transaction open loses it to the server, which rolls it back when the session ends.
 */
import type { Pool, PoolClient } from 'pg';
import { TransactionError } from '../../model/errors.js';
import { finishMessages } from './finish.js';
import { ensureQueueRow, type ConfigCache } from './queue-row.js';
import { quoteIdent } from './sql-text.js';
import { translatePgError } from './translate-error.js';
import { writeContext } from './tx.js';
import type { Finish, FinishResult, HandlerTransaction } from '../contract/contract.js';

export async function beginHandlerTransaction(
  pool: Pool,
  schema: string,
  configs: ConfigCache,
  where: string,
): Promise<HandlerTransaction> {
  let client: PoolClient;
  try {
    client = await pool.connect();
  } catch (error) {
    throw translatePgError(error, where);
  }
  try {
    await client.query('BEGIN');
  } catch (error) {
    client.release(true);
    throw translatePgError(error, where);
  }
  let ended = false;
  /** Ends the transaction once and gives the connection back (dropping it when it broke). */
  const end = async (statement: 'COMMIT' | 'ROLLBACK'): Promise<void> => {
    if (ended) return;
    ended = true;
    try {
      await client.query(statement);
      client.release();
    } catch (error) {
      client.release(error instanceof Error ? error : true);
      throw translatePgError(error, where);
    }
  };
  // The handler's view of the connection: it may outlive the transaction (a timeout, a lost lock), and the
  // connection then serves others, so a late statement is refused rather than run outside the transaction.
  const tx = {
    query(text: string, values: unknown[]): Promise<{ rows: unknown[] }> {
      if (ended) return Promise.reject(endedError());
      return client.query(text, values);
    },
    getTransactionStatus: () => (ended ? 'I' : client.getTransactionStatus()),
  };
  return {
    tx,
    async commit(queue: string, consumerId: string, finish: Finish): Promise<FinishResult> {
      if (ended) return 'lost';
      if (client.getTransactionStatus() !== 'T') {
        await end('ROLLBACK').catch(() => undefined);
        throw new TransactionError(
          "the handler's transaction (job.tx) was ended or failed before its outcome was written: never COMMIT or " +
            'ROLLBACK job.tx, and let a failed statement throw',
        );
      }
      let result: FinishResult | undefined;
      try {
        const row = await ensureQueueRow(client, quoteIdent(schema), queue);
        const write = writeContext(client, schema, queue, row, configs);
        [result] = await finishMessages(write.tx, consumerId, [finish]);
        if (result === 'ok') await write.finish();
      } catch (error) {
        // The handler's own statements may have failed the transaction: nothing of it commits.
        await end('ROLLBACK').catch(() => undefined);
        throw translatePgError(error, where);
      }
      if (result !== 'ok') {
        await end('ROLLBACK');
        return 'lost';
      }
      await end('COMMIT');
      return 'ok';
    },
    rollback: () => end('ROLLBACK'),
  };
}

function endedError(): TransactionError {
  return new TransactionError(
    "the handler's transaction (job.tx) has ended: the handler timed out, lost its message or returned; " +
      'nothing it sends now is run',
  );
}
