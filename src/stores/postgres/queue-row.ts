/** A queue's row as the store's transactions read it first: the configuration and what claims share. */
import { ParsedConfigs } from '../sqlite/parsed-configs.js';
import type { Queryable } from './queryable.js';
import type { QueueConfig } from '../../model/types.js';

export interface QueueRow {
  readonly config: string | null;
  readonly dry_runs: number;
  readonly eoq_until: number;
  readonly rate_tat: number;
  readonly gc_at: number;
  readonly gc_lock_until: number;
  /** Pending + locked messages, summed over the counter slots. */
  readonly size: number;
  /** The queue's filter classes. */
  readonly classes: string[];
  /** The earliest lock end of its held messages (one index seek), or null when none is held. */
  readonly next_lock: number | null;
}

const EMPTY: QueueRow = {
  config: null,
  dry_runs: 0,
  eoq_until: 0,
  rate_tat: 0,
  gc_at: 0,
  gc_lock_until: 0,
  size: 0,
  classes: [],
  next_lock: null,
};

/**
 * Reads the queue's row, first making it when missing: an insert that meets the row waits for any transaction
 * updating it to end, and a read need not. A row this call made reads as the defaults.
 */
export async function ensureQueueRow(db: Queryable, s: string, queue: string): Promise<QueueRow> {
  const read = (): Promise<QueueRow | undefined> =>
    db
      .query<QueueRow>(
        `SELECT q.config, q.dry_runs, q.eoq_until, q.rate_tat, q.gc_at, q.gc_lock_until,
           (SELECT coalesce(sum(c.size), 0) FROM ${s}.counts c WHERE c.queue = $1) AS size,
           ARRAY(SELECT f.filters FROM ${s}.classes f WHERE f.queue = $1) AS classes,
           (SELECT min(m.lock_until) FROM ${s}.messages m WHERE m.queue = $1 AND m.phase = 1) AS next_lock
         FROM ${s}.queues q WHERE q.queue = $1`,
        [queue],
      )
      .then((result) => result.rows[0]);
  const row = await read();
  if (row !== undefined) return row;
  await db.query(`INSERT INTO ${s}.queues (queue) VALUES ($1) ON CONFLICT DO NOTHING`, [queue]);
  return (await read()) ?? EMPTY;
}

/** Each queue's configuration as last parsed (sqlite/parsed-configs.ts), and its read from the queue's row. */
export class ConfigCache extends ParsedConfigs {
  async read(db: Queryable, s: string, queue: string): Promise<QueueConfig> {
    const result = await db.query<{ config: string | null }>(`SELECT config FROM ${s}.queues WHERE queue = $1`, [
      queue,
    ]);
    return this.of(queue, result.rows[0]?.config ?? null);
  }
}
