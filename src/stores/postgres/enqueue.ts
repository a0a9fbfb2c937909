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

type Column = string | number | boolean | null;

/** The per-message columns after ids and payloads, in the function's order, each with its SQL type. */
const COLUMNS: readonly [string, (m: NewMessage) => Column][] = [
  ['smallint', (m) => (m.encoding === 'json' ? 0 : 1)],
  ['text', (m) => JSON.stringify(m.metadata)],
  ['text', (m) => m.filterClass],
  // -1: LIFO (sql-functions.ts)
  ['bigint', (m) => (m.lifo ? -1 : m.initialBackoffMs)],
  ['text', (m) => m.policy],
  ['integer', (m) => m.priority],
  ['text', (m) => m.group],
  ['text', (m) => m.debounceId],
  ['boolean', (m) => m.allowRequeue],
  ['boolean', (m) => m.replacePayload],
];

export async function enqueueMessages(
  db: Queryable,
  schema: string,
  queue: string,
  messages: readonly NewMessage[],
  now = Date.now(),
): Promise<EnqueueResult[]> {
  if (messages.length === 0) return [];
  const values: unknown[] = [
    queue,
    now,
    messages.map((m) => m.id),
    messages.map((m) => Buffer.from(m.payload.buffer, m.payload.byteOffset, m.payload.byteLength)),
  ];
  const args = ['$1', '$2', '$3::text[]', '$4::bytea[]'];
  // A column the same for every message (the usual batch) goes as one value that the server repeats: the
  // driver escapes each element of an array parameter, a large share of a big batch's client time.
  const count = `$${values.length + COLUMNS.length + 1}`;
  let repeated = false;
  for (const [type, value] of COLUMNS) {
    const column = messages.map(value);
    const first = column[0] ?? null;
    const same = column.every((v) => v === first);
    repeated ||= same;
    values.push(same ? first : column);
    args.push(
      same ? `array_fill($${values.length}::${type}, ARRAY[${count}::integer])` : `$${values.length}::${type}[]`,
    );
  }
  if (repeated) values.push(messages.length);
  const result = await db.query<ResultRow>(
    `SELECT * FROM ${quoteIdent(schema)}.enqueue_messages(${args.join(', ')})`,
    values,
  );
  // No rows: every message was added.
  if (result.rows.length === 0) return messages.map((m): EnqueueResult => ({ ok: true, id: m.id, action: 'added' }));
  return result.rows.map((r): EnqueueResult =>
    r.r_ok
      ? { ok: true, id: r.r_id, action: r.r_action ?? 'added' }
      : { ok: false, id: r.r_id, state: r.r_state ?? 'queued' },
  );
}
