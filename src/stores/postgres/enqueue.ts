/**
 * The enqueue: one call of the schema's `enqueue_messages` function (sql-functions.ts) with the messages as
 * arrays, so a batch of any size is one statement, one round trip and, outside a transaction, one commit.
 * A function of (client, queue, messages): any `pg` client may run it, inside a transaction of its own.
 */
import type { Queryable } from './queryable.js';
import { quoteIdent } from './sql-text.js';
import type { NewMessage } from '../contract/contract.js';
import type { EnqueueResult, MessageState } from '../../model/types.js';

interface ResultRow {
  readonly r_id: string;
  readonly r_ok: boolean;
  readonly r_action: 'added' | 'revived' | 'requeued' | 'debounced' | null;
  readonly r_state: MessageState | null;
}

export async function enqueueMessages(
  db: Queryable,
  schema: string,
  queue: string,
  messages: readonly NewMessage[],
  now = Date.now(),
): Promise<EnqueueResult[]> {
  if (messages.length === 0) return [];
  const result = await db.query<ResultRow>(
    `SELECT * FROM ${quoteIdent(schema)}.enqueue_messages($1, $2, $3::text[], $4::bytea[], $5::smallint[],
       $6::text[], $7::text[], $8::bigint[], $9::text[], $10::integer[], $11::text[], $12::text[], $13::boolean[],
       $14::boolean[])`,
    [
      queue,
      now,
      messages.map((m) => m.id),
      messages.map((m) => Buffer.from(m.payload.buffer, m.payload.byteOffset, m.payload.byteLength)),
      messages.map((m) => (m.encoding === 'json' ? 0 : 1)),
      messages.map((m) => JSON.stringify(m.metadata)),
      messages.map((m) => m.filterClass),
      // -1: LIFO (sql-functions.ts)
      messages.map((m) => (m.lifo ? -1 : m.initialBackoffMs)),
      messages.map((m) => m.policy),
      messages.map((m) => m.priority),
      messages.map((m) => m.group),
      messages.map((m) => m.debounceId),
      messages.map((m) => m.allowRequeue),
      messages.map((m) => m.replacePayload),
    ],
  );
  // No rows: every message was added.
  if (result.rows.length === 0) return messages.map((m): EnqueueResult => ({ ok: true, id: m.id, action: 'added' }));
  return result.rows.map((r): EnqueueResult =>
    r.r_ok
      ? { ok: true, id: r.r_id, action: r.r_action ?? 'added' }
      : { ok: false, id: r.r_id, state: r.r_state ?? 'queued' },
  );
}
