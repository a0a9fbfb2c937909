/**
 * GC of one queue on SQLite, under the queue's GC lock: trims its events, fails waiting messages past their time
 * to live, deletes finished messages past their lifetime or beyond the counts kept, and lapsed consumers, each in
 * chunks of its own transaction so claims go on between them.
 */
import { sleep } from '../../model/time.js';
import { expireWaiting } from './expiry.js';
import type { EventLog } from './events.js';
import type { Statement, Statements } from './statements.js';
import type { WriteContext } from './write-context.js';
import type { GcResult, QueueConfig } from '../../model/types.js';

// Rows GC deletes per transaction, so a large GC never holds the write lock for long.
const GC_CHUNK = 5000;
// A crashed GC's lock lapses after this.
const GC_LOCK_MS = 60_000;

/** What GC uses of the store: its statements and event log, a write on the queue, a plain transaction. */
export interface GcStore {
  readonly sql: Statements;
  readonly events: EventLog;
  write<T>(fn: (tx: WriteContext) => T): Promise<T>;
  transaction<T>(fn: () => T): Promise<T>;
}

export async function runGc(store: GcStore, queue: string, config: QueueConfig, force: boolean): Promise<GcResult> {
  const took = await store.write(({ now }) => {
    const params = { queue, now, force: force ? 1 : 0, interval: config.gcIntervalMs, lockUntil: now + GC_LOCK_MS };
    return store.sql.takeGcLock.run(params).changes === 1;
  });
  if (!took) return { ran: false, removed: 0 };
  let removed = 0;
  try {
    await store.transaction(() => store.events.trim(queue, config, Date.now()));
    await expireChunks(store);
    const sql = store.sql;
    const age = (batch: Statement, lifetimeMs: number) => (now: number) =>
      batch.run({ queue, now, before: now - lifetimeMs, limit: GC_CHUNK }).changes;
    const beyond = (batch: Statement, keep: number) => (now: number) =>
      batch.run({ queue, now, keep, limit: GC_CHUNK }).changes;
    removed += await gcChunks(store, queue, age(sql.gcBatch, config.gcLifetimeMs), 'done');
    removed += await gcChunks(store, queue, age(sql.gcFailedBatch, config.failedLifetimeMs), 'failed');
    if (config.keepDone !== null)
      removed += await gcChunks(store, queue, beyond(sql.gcDoneBeyond, config.keepDone), 'done');
    if (config.keepFailed !== null) {
      removed += await gcChunks(store, queue, beyond(sql.gcFailedBeyond, config.keepFailed), 'failed');
    }
    await store.transaction(() => {
      const now = Date.now();
      store.sql.lapsedConsumers.run(queue, now);
      store.sql.pastGroupRates.run(queue, now);
    });
  } finally {
    await store.transaction(() => store.sql.releaseGcLock.run(queue));
  }
  return { ran: true, removed };
}

/** Fails waiting messages past their time to live, in chunks: each its own write, so claims go on between. */
async function expireChunks(store: GcStore): Promise<void> {
  while ((await store.write((tx) => expireWaiting(tx, GC_CHUNK))) === GC_CHUNK) await sleep(0);
}

/** Runs `deleteChunk` (at most GC_CHUNK rows, returns how many) until it deletes fewer, keeping the counts. */
async function gcChunks(
  store: GcStore,
  queue: string,
  deleteChunk: (now: number) => number,
  counter: 'done' | 'failed',
): Promise<number> {
  let removed = 0;
  for (;;) {
    const deleted = await store.transaction(() => {
      const changes = deleteChunk(Date.now());
      if (changes > 0) {
        const counts = { queue, size: 0, done: 0, failed: 0 };
        counts[counter] = -changes;
        store.sql.addCounts.run(counts);
      }
      return changes;
    });
    removed += deleted;
    if (deleted < GC_CHUNK) return removed;
    await sleep(0); // let the process breathe between chunks
  }
}
