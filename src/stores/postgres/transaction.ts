/**
 * A transaction on a pooled client. One PostgreSQL aborted as a deadlock's victim or for a serialization
 * failure applied nothing, so it is run again, a few times, after a short random pause: two writers that lock
 * the same rows in opposite orders (a cancel of a flow's parent and GC's expiry of its child) both go through.
 */
import type { PoolClient } from 'pg';
import { sleep } from '../../model/time.js';

const RERUNS = 3;
// SQLSTATEs of a transaction rolled back whole: deadlock_detected, serialization_failure.
export const ROLLED_BACK_WHOLE: ReadonlySet<unknown> = new Set(['40P01', '40001']);

export async function runTransaction<T>(
  client: PoolClient,
  fn: (client: PoolClient) => Promise<T>,
  begin: string,
): Promise<T> {
  for (let run = 1; ; run++) {
    await client.query(begin);
    try {
      const result = await fn(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      if (run > RERUNS || !ROLLED_BACK_WHOLE.has((error as { code?: unknown } | null)?.code)) throw error;
    }
    await sleep(5 + Math.random() * 20 * run);
  }
}
