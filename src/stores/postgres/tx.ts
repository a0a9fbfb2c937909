/**
 * A write transaction on one queue: the queue's row read first, then the operation, then what it gathered
 * (counter changes, events, wake-ups) written in one statement before the commit, so they commit or roll
 * back with the transition and each NOTIFY fires at the commit.
 */
import { eventSlotText, QUEUE_EVENT_TYPES, type QueueEventType } from '../../model/events.js';
import type { ConfigCache, QueueRow } from './queue-row.js';
import type { Queryable } from './queryable.js';
import { wakeChannel } from './channel.js';
import { quoteIdent } from './sql-text.js';
import type { QueueConfig } from '../../model/types.js';

export interface WriteContext {
  readonly db: Queryable;
  /** The schema's name, and quoted for SQL. */
  readonly schema: string;
  readonly s: string;
  readonly queue: string;
  readonly now: number;
  readonly row: QueueRow;
  /** This queue's configuration, as read in this transaction. */
  readonly config: QueueConfig;
  /** Another queue's configuration (a dead-letter queue), read in this transaction. */
  configOf(queue: string): Promise<QueueConfig>;
  /** Records a queue event (of this queue unless named), written at the end if that queue has events on. */
  event(type: QueueEventType, id: string, attempt: number, error?: string | null, queue?: string): void;
  /** Adds to a queue's counters at the end. */
  count(size: number, done: number, failed: number, queue?: string): void;
  /** Wakes a queue's idle workers at the commit. */
  wake(queue?: string): void;
}

interface Gathered {
  readonly events: Map<string, { types: number[]; ids: string[]; attempts: number[]; errors: (string | null)[] }>;
  readonly counts: Map<string, [number, number, number]>;
  readonly wakes: Set<string>;
}

const TYPE_CODES = new Map<QueueEventType, number>(QUEUE_EVENT_TYPES.map((type, code) => [type, code]));

export function writeContext(
  db: Queryable,
  schema: string,
  queue: string,
  row: QueueRow,
  configs: ConfigCache,
): { tx: WriteContext; finish: () => Promise<void> } {
  const s = quoteIdent(schema);
  const gathered: Gathered = { events: new Map(), counts: new Map(), wakes: new Set() };
  const config = configs.of(queue, row.config);
  const now = Date.now();
  const tx: WriteContext = {
    db,
    schema,
    s,
    queue,
    now,
    row,
    config,
    configOf: (q) => (q === queue ? Promise.resolve(config) : configs.read(db, s, q)),
    event(type, id, attempt, error = null, q = queue) {
      let list = gathered.events.get(q);
      if (list === undefined) {
        list = { types: [], ids: [], attempts: [], errors: [] };
        gathered.events.set(q, list);
      }
      list.types.push(TYPE_CODES.get(type) ?? 0);
      list.ids.push(id);
      list.attempts.push(attempt);
      list.errors.push(eventSlotText(type, error));
    },
    count(size, done, failed, q = queue) {
      const c = gathered.counts.get(q) ?? [0, 0, 0];
      gathered.counts.set(q, [c[0] + size, c[1] + done, c[2] + failed]);
    },
    wake(q = queue) {
      gathered.wakes.add(q);
    },
  };
  return { tx, finish: () => writeGathered(tx, gathered) };
}

async function writeGathered(tx: WriteContext, gathered: Gathered): Promise<void> {
  const { db, s, now } = tx;
  const calls: string[] = [];
  const params: unknown[] = [];
  const param = (value: unknown): string => {
    params.push(value);
    return `$${params.length}`;
  };
  // The queue rows (events) before the counter slots: the order every transaction takes them in.
  for (const [q, list] of gathered.events) {
    if (!(await tx.configOf(q)).events) continue;
    calls.push(
      `${s}.add_events(${param(q)}, ${param(now)}, ${param(list.types)}::smallint[], ${param(list.ids)}::text[], ` +
        `${param(list.attempts)}::integer[], ${param(list.errors)}::text[])`,
    );
  }
  for (const [q, [size, done, failed]] of gathered.counts) {
    if (size === 0 && done === 0 && failed === 0) continue;
    calls.push(`${s}.add_counts(${param(q)}, ${param(size)}, ${param(done)}, ${param(failed)})`);
  }
  if (gathered.wakes.size > 0) {
    const channel = param(wakeChannel(tx.schema));
    for (const q of gathered.wakes) calls.push(`pg_notify(${channel}, ${param(q)})`);
  }
  if (calls.length > 0) await db.query(`SELECT ${calls.join(', ')}`, params);
}
