/**
 * SQLite's own write rate on the same filesystem, with the settings kvmq's
 * store uses (src/stores/sqlite/store.ts: WAL, the URL's synchronous, 32 MiB cache,
 * IMMEDIATE transactions): one small keyed row per transaction, and rows in
 * transactions of the batch size kvmq's batched enqueue uses.
 */
import { rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import type BetterSqlite3 from 'better-sqlite3';
import { parseSqliteUrl } from '../../src/stores/sqlite/store.js';
import { repeat, warmSize, type BenchSizes } from '../common.js';
import { RAW_PAYLOAD, rawIds, type RawFigures } from './index.js';

// Like a message row: an integer key for order, a unique text id, a small payload. The ids ascend, the
// store's best case for a keyed insert (kvmq's generated ids are time-ordered for the same reason).
const DDL = `CREATE TABLE raw (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, value BLOB NOT NULL) STRICT`;
export async function measureRaw(url: string, sizes: BenchSizes): Promise<RawFigures> {
  const { path, synchronous } = parseSqliteUrl(url);
  // Beside kvmq's file, so both write to the same disk.
  const rawPath = `${path}.raw-${process.pid}`;
  const Database = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3;
  const db = new Database(rawPath);
  try {
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${synchronous}`);
    db.pragma('cache_size = -32768');
    db.exec(DDL);
    const insert = db.prepare('INSERT INTO raw (id, value) VALUES (?, ?)');
    const id = rawIds();
    const one = db.transaction(() => insert.run(id(), RAW_PAYLOAD));
    const many = db.transaction((n: number) => {
      for (let i = 0; i < n; i++) insert.run(id(), RAW_PAYLOAD);
    });
    const single = (n: number): number =>
      timedSync(() => {
        for (let i = 0; i < n; i++) one.immediate();
      });
    const batched = (n: number): number =>
      timedSync(() => {
        for (let done = 0; done < n; done += sizes.batchSize) many.immediate(Math.min(sizes.batchSize, n - done));
      });
    single(warmSize(sizes.enqueueSingle, sizes));
    const singleRate = await repeat(sizes.runs, sizes.enqueueSingle, () =>
      Promise.resolve(single(sizes.enqueueSingle)),
    );
    batched(warmSize(sizes.enqueueBatched, sizes));
    const batchedRate = await repeat(sizes.runs, sizes.enqueueBatched, () =>
      Promise.resolve(batched(sizes.enqueueBatched)),
    );
    return { single: singleRate, batched: batchedRate, setup: `better-sqlite3, WAL, synchronous=${synchronous}` };
  } finally {
    db.close();
    for (const suffix of ['', '-wal', '-shm']) rmSync(rawPath + suffix, { force: true });
  }
}

function timedSync(task: () => void): number {
  const start = performance.now();
  task();
  return performance.now() - start;
}
