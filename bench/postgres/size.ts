/**
 * `node --import tsx bench/postgres/size.ts [--store URL] [--messages N] [--rate R] [--sample-s S] [--markdown]`
 *
 * What a steady flow does to PostgreSQL's tables: a producer enqueues N messages (default 10,000,000) in
 * batches at R a second (default 5,000), one worker at concurrency 64 handles them (a no-op handler), and the
 * client's maintenance runs GC (done messages kept 60 s). Every S seconds (default 30) it reads the size of
 * each table of the schema with its indexes, live and dead rows, the share of updates that were HOT, and
 * autovacuum's runs. The store is the URL given, else $KVMQ_TEST_POSTGRES_URL (`node scripts/servers.mjs run
 * postgres -- node --import tsx bench/postgres/size.ts`), in a fresh schema dropped at the end.
 */
import { parseArgs } from 'node:util';
import pg from 'pg';
import { connect } from '../../src/index.js';
import { MB, sleepUntil, table, whole } from '../common.js';
import { benchServerUrl } from './server.js';

const { values } = parseArgs({
  options: {
    store: { type: 'string' },
    messages: { type: 'string', default: '10000000' },
    rate: { type: 'string', default: '5000' },
    'sample-s': { type: 'string', default: '30' },
    markdown: { type: 'boolean', default: false },
  },
});
const base = benchServerUrl(values.store);
const total = Number(values.messages);
const perSec = Number(values.rate);
const sampleMs = Number(values['sample-s']) * 1000;
const BATCH = 500;
const schema = `kvmq_size_${process.pid}`;
const queue = 'size';

interface TableRow {
  readonly table: string;
  readonly total_mb: number;
  readonly heap_mb: number;
  readonly index_mb: number;
  readonly live: number;
  readonly dead: number;
  readonly updates: number;
  readonly hot: number;
  readonly autovacuums: number;
}

async function tables(db: pg.Client): Promise<TableRow[]> {
  const { rows } = await db.query<TableRow>(
    `SELECT relname AS table,
       pg_total_relation_size(relid)::float8 / ${MB} AS total_mb,
       pg_relation_size(relid)::float8 / ${MB} AS heap_mb,
       pg_indexes_size(relid)::float8 / ${MB} AS index_mb,
       n_live_tup::float8 AS live, n_dead_tup::float8 AS dead,
       n_tup_upd::float8 AS updates, n_tup_hot_upd::float8 AS hot, autovacuum_count::float8 AS autovacuums
     FROM pg_stat_user_tables WHERE schemaname = $1 ORDER BY pg_total_relation_size(relid) DESC`,
    [schema],
  );
  return rows;
}

const client = await connect(`${base}?schema=${schema}`, { onError: (error) => console.error('kvmq:', error) });
await client.configure(queue, { gcLifetimeMs: 60_000, gcIntervalMs: 5_000 });
const db = new pg.Client({ connectionString: base.replace(/\?.*$/, '') });
await db.connect();
let handled = 0;
const worker = client.worker(queue, () => void (handled += 1), { concurrency: 64 });
const started = performance.now();
let enqueued = 0;
let nextSample = started + sampleMs;
const samples: string[][] = [];
const sample = async (): Promise<void> => {
  const rows = await tables(db);
  const messages = rows.find((row) => row.table === 'messages');
  const seconds = (performance.now() - started) / 1000;
  samples.push([
    whole.format(seconds),
    whole.format(enqueued),
    whole.format(handled),
    rows.reduce((sum, row) => sum + row.total_mb, 0).toFixed(1),
    messages === undefined ? '-' : messages.heap_mb.toFixed(1),
    messages === undefined ? '-' : messages.index_mb.toFixed(1),
    messages === undefined ? '-' : whole.format(messages.live),
    messages === undefined ? '-' : whole.format(messages.dead),
    messages === undefined ? '-' : String(messages.autovacuums),
  ]);
  console.error(`${samples.at(-1)?.join('  ')}`);
};
try {
  while (enqueued < total) {
    const n = Math.min(BATCH, total - enqueued);
    await client.enqueueBatch(
      queue,
      Array.from({ length: n }, (_, i) => ({ payload: { n: enqueued + i } })),
    );
    enqueued += n;
    // Paced: batch k leaves no earlier than k × BATCH / rate seconds after the start.
    await sleepUntil(started + (enqueued / perSec) * 1000);
    if (performance.now() >= nextSample) {
      nextSample += sampleMs;
      await sample();
    }
  }
  while (handled < total) await new Promise((resolve) => setTimeout(resolve, 100));
  await sample();
  const seconds = (performance.now() - started) / 1000;
  console.log(
    `${whole.format(total)} messages at ${whole.format(perSec)}/s asked, ${whole.format(total / seconds)}/s ` +
      `reached; load ${(await import('node:os')).loadavg()[0]?.toFixed(1)}`,
  );
  const header = [
    's',
    'enqueued',
    'handled',
    'schema MB',
    'messages heap MB',
    'its indexes MB',
    'live',
    'dead',
    'autovacuums',
  ];
  console.log(table(header, samples, values.markdown));
  const last = await tables(db);
  console.log(
    table(
      ['table', 'total MB', 'heap MB', 'indexes MB', 'live', 'dead', 'updates', 'HOT share', 'autovacuums'],
      last.map((row) => [
        row.table,
        row.total_mb.toFixed(1),
        row.heap_mb.toFixed(1),
        row.index_mb.toFixed(1),
        whole.format(row.live),
        whole.format(row.dead),
        whole.format(row.updates),
        row.updates === 0 ? '-' : `${((100 * row.hot) / row.updates).toFixed(0)} %`,
        String(row.autovacuums),
      ]),
      values.markdown,
    ),
  );
} finally {
  await worker.stop();
  await client.close();
  await db.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await db.end();
}
