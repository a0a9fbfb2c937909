/**
 * `node --import tsx bench/sqlite-pages.ts [--n N]`
 *
 * Pages written per message on SQLite, events off and on: the WAL frames one full lifecycle (enqueue in
 * batches of 1000, claim, finish; one worker, no-op handler) adds, at concurrency 1 and 64. A second
 * connection holds a read snapshot from before the run, so no checkpoint can restart the WAL and its size
 * counts every frame written. Unlike times on a shared machine, the figure does not depend on the load: it
 * is what each commit costs in writes, the part of queue events' cost that grows with the pages they dirty.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type BetterSqlite3 from 'better-sqlite3';
import { connect } from '../src/index.js';
import { table, type BenchSizes } from './common.js';
import { runLifecycle } from './lifecycle.js';

const { values } = parseArgs({ options: { n: { type: 'string' } } });
const n = Number(values.n ?? 3000);
const Database = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3;
const PAGE_SIZE = 4096;
// A WAL file's header, and each frame's header before its page.
const WAL_HEADER = 32;
const FRAME_HEADER = 24;

/** WAL frames per message of one lifecycle run on a fresh file. */
async function framesPerMessage(concurrency: number, events: boolean): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'kvmq-bench-pages-'));
  const path = join(dir, 'bench.db');
  const client = await connect(`sqlite:${path}`, { maintenance: false });
  const reader = new Database(path);
  try {
    await client.configure('pages', { events });
    reader.pragma('wal_checkpoint(TRUNCATE)');
    reader.exec('BEGIN');
    reader.prepare('SELECT count(*) FROM kvmq_queues').get();
    const ctx = { client, sizes: { batchSize: 1000 } as BenchSizes, queue: (label: string) => label };
    await runLifecycle(ctx, 'pages', concurrency, n);
    const frames = (statSync(`${path}-wal`).size - WAL_HEADER) / (PAGE_SIZE + FRAME_HEADER);
    reader.exec('COMMIT');
    return frames / n;
  } finally {
    reader.close();
    await client.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const rows: string[][] = [];
for (const concurrency of [1, 64]) {
  const off = await framesPerMessage(concurrency, false);
  const on = await framesPerMessage(concurrency, true);
  rows.push([`lifecycle, concurrency ${concurrency}`, String(n), off.toFixed(2), on.toFixed(2), (on / off).toFixed(3)]);
}
const header = ['measurement', 'messages', 'pages/msg, events off', 'events on', 'on/off'];
process.stdout.write(`${table(header, rows, false)}\n`);
