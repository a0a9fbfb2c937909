/**
 * Debounce: an enqueue with a debounce id replaces the message still waiting
 * (`queued` or `queued-with-backoff`) with that id. The id is a column of the
 * message row, indexed only while the row is pending, so the index holds no
 * entry for a message that was claimed, finished or removed.
 */
import { content } from './content.js';
import { stateOf, type StateRow } from './state.js';
import type { WriteContext } from './failures.js';
import type { NewMessage } from '../contract/contract.js';
import type { EnqueueResult } from '../../model/types.js';

interface WaitingRow extends StateRow {
  readonly seq: number;
  readonly id: string;
}

/**
 * Gives the waiting message of `debounceId` this message's payload, encoding, metadata and ready time, in the
 * caller's transaction; null when none waits (the caller then adds the message).
 */
export function debounceInto(tx: WriteContext, debounceId: string, m: NewMessage): EnqueueResult | null {
  const { sql, queue, now } = tx;
  const rows = sql.debounceWaiting.all(queue, debounceId) as WaitingRow[];
  const waiting = rows.find((row) => {
    const state = stateOf(row, now);
    return state === 'queued' || state === 'queued-with-backoff';
  });
  if (waiting === undefined) return null;
  const [payload, encoding, metadata, , readyAt] = content(m, now);
  sql.debounce.run({ seq: waiting.seq, payload, encoding, metadata, readyAt, now });
  tx.event('enqueued', waiting.id, 0);
  return { ok: true, id: waiting.id, action: 'debounced' };
}
