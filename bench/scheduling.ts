/**
 * `node --import tsx bench/scheduling.ts [--store URL] [--rounds N] [--quick] [--baseline DIR]`
 *
 * What the scheduling features cost plain messages (no priority, group, debounce or rate limit): enqueue and
 * the full lifecycle on this checkout and, with `--baseline DIR` (a checkout from before, e.g. `git archive
 * bfb4eb9`), on that checkout's client, alternating run by run on fresh queues; medians of the rounds.
 * Target: within 10 %. What a deep queue costs priority claims is bench/priority.ts.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { connect, type Client } from '../src/index.js';
import { median, successFinish, table, timed, whole, type BenchContext, type BenchSizes } from './common.js';
import { batched, single } from './enqueue.js';
import { runLifecycle } from './lifecycle.js';
import { storeOf } from '../src/client-store.js';
import type { Store } from '../src/store/contract.js';

const BATCH = 1000;

interface Case {
  readonly label: string;
  readonly n: number;
  readonly run: (ctx: BenchContext, queue: string, n: number) => Promise<number>;
}

const { values } = parseArgs({
  options: {
    store: { type: 'string' },
    rounds: { type: 'string' },
    quick: { type: 'boolean' },
    baseline: { type: 'string' },
  },
});
const quick = values.quick === true;
const rounds = Number(values.rounds ?? (quick ? 1 : 5));
const scale = quick ? 0.1 : 1;
const cases: Case[] = [
  { label: 'enqueue+claim+finish, store calls', n: 4000 * scale, run: storeCycle },
  { label: 'enqueue, single (64 in flight)', n: 5000 * scale, run: single },
  { label: 'enqueue, batches of 1000', n: 50_000 * scale, run: batched },
  { label: 'lifecycle, concurrency 1', n: 3000 * scale, run: (ctx, q, n) => runLifecycle(ctx, q, 1, n) },
  { label: 'lifecycle, concurrency 64', n: 30_000 * scale, run: (ctx, q, n) => runLifecycle(ctx, q, 64, n) },
];

const tempDir = values.store === undefined ? mkdtempSync(join(tmpdir(), 'kvmq-bench-scheduling-')) : null;
const url = values.store ?? `sqlite:${join(tempDir ?? '', 'bench.db')}`;
const client = await connect(url);
// The baseline's client speaks the same public API; on the default SQLite store it gets a file of its own
// (an older kvmq refuses a newer schema).
type Connect = (url: string) => Promise<Client>;
const baselineUrl = tempDir === null ? url : `sqlite:${join(tempDir, 'baseline.db')}`;
const baselineClient =
  values.baseline === undefined
    ? null
    : await ((await import(join(values.baseline, 'src/index.ts'))) as { connect: Connect }).connect(baselineUrl);
const runId = Date.now().toString(36);
const sizes = { batchSize: BATCH } as BenchSizes;
const ctx: BenchContext = { client, sizes, queue: (label) => `bench-sched-${runId}-${label}` };
const queues: string[] = [];
let made = 0;

/** A client's store; a baseline checkout from before the store went private still has it as a field. */
function storeBehind(c: Client): Store {
  const old = (c as unknown as { store?: Store }).store;
  return old ?? storeOf(c);
}

/**
 * The store's own calls, one after another, without a worker: enqueue two, claim (asking for more than there
 * is, so a claim also looks past priority 0), finish them. The least noisy view of the plain hot path.
 */
async function storeCycle({ client: c }: BenchContext, queue: string, n: number): Promise<number> {
  const request = { consumerId: 'bench', max: 4, lockMs: 30_000, accepts: null, eoqBackoffMs: () => 10 };
  return timed(async () => {
    for (let i = 0; i < n; i += 2) {
      await c.enqueueBatch(queue, [{ payload: { i } }, { payload: { i: i + 1 } }]);
      const { messages } = await storeBehind(c).claim(queue, request);
      const finishes = messages.map(successFinish);
      await storeBehind(c).finish(queue, request.consumerId, finishes);
    }
  });
}

type Variant = 'now' | 'baseline';

async function once(c: Case, variant: Variant): Promise<number> {
  const queue = ctx.queue(`${(made += 1)}-${variant}`);
  queues.push(queue);
  const on = variant === 'baseline' && baselineClient !== null ? baselineClient : client;
  return c.run({ ...ctx, client: on }, queue, c.n);
}

async function plainCosts(): Promise<string> {
  const rows: string[][] = [];
  const variants: Variant[] = baselineClient === null ? ['now'] : ['now', 'baseline'];
  for (const c of cases) {
    for (const variant of variants) await once(c, variant); // warm-up
    const times = new Map<Variant, number[]>(variants.map((v) => [v, []]));
    for (let round = 0; round < rounds; round++) {
      for (let k = 0; k < variants.length; k++) {
        const variant = variants[(round + k) % variants.length] ?? 'now';
        times.get(variant)?.push(await once(c, variant));
      }
    }
    const ms = (v: Variant): number => median(times.get(v) ?? []);
    const perSec = (v: Variant): string => whole.format((c.n * 1000) / ms(v));
    const row = [c.label, whole.format(c.n), perSec('now')];
    if (baselineClient !== null) row.push(perSec('baseline'), `${(ms('now') / ms('baseline')).toFixed(3)} ×`);
    rows.push(row);
    const spread = variants.map((v) => `${v} ${(times.get(v) ?? []).map(Math.round).join(', ')} ms`);
    process.stderr.write(`bench: ${c.label}: ${spread.join('; ')}\n`);
  }
  const header = ['plain messages', 'messages', 'this checkout /s'];
  if (baselineClient !== null) header.push('baseline /s', 'time now/baseline');
  return table(header, rows, false);
}

try {
  const plain = await plainCosts();
  process.stdout.write(`${plain}\nstore ${storeOf(client).kind}, median of ${rounds} rotating rounds\n`);
} finally {
  await client.clear(...queues);
  await baselineClient?.close();
  await client.close();
  if (tempDir !== null) rmSync(tempDir, { recursive: true, force: true });
}
