/**
 * `node --import tsx bench/scheduling.ts [--store URL] [--rounds N] [--backlog N] [--quick] [--baseline DIR]`
 *
 * What priorities cost, in one run:
 * - plain messages (no priority, group, debounce or rate limit): enqueue and the full lifecycle on this
 *   checkout and, with `--baseline DIR` (a checkout from before, e.g. `git archive bfb4eb9`), on that
 *   checkout's client, alternating run by run on fresh queues; medians of the rounds. Target: within 10 %.
 * - priority claims: a worker (concurrency 64) drains 5,000 messages from a queue of `--backlog` (default
 *   1,000,000) messages over 10 priorities, and from a queue of 10,000 over the same priorities, in rounds
 *   refilled between them; the cost per message handled is compared. Target: the large backlog within
 *   1.5 × of the small one. The same with every message at priority 0 is the control: what depth alone costs.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { connect, type Client } from '../src/index.js';
import { median, signal, table, timed, whole, type BenchContext, type BenchSizes } from './common.js';
import { batched, single } from './enqueue.js';
import { runLifecycle } from './lifecycle.js';
import { storeOf } from '../src/client-store.js';

const PRIORITIES = 10;
const SMALL = 10_000;
// Messages drained from each queue: half the small one, so the drains (and what workers take past each
// round's count while stopping) never empty it.
const PROBE = SMALL / 2;
const BATCH = 1000;
// As the backlog measurement: the worker that drains runs 64 handlers at once.
const DRAIN_CONCURRENCY = 64;

interface Case {
  readonly label: string;
  readonly n: number;
  readonly run: (ctx: BenchContext, queue: string, n: number) => Promise<number>;
}

const { values } = parseArgs({
  options: {
    store: { type: 'string' },
    rounds: { type: 'string' },
    backlog: { type: 'string' },
    quick: { type: 'boolean' },
    baseline: { type: 'string' },
  },
});
const quick = values.quick === true;
const rounds = Number(values.rounds ?? (quick ? 1 : 5));
const scale = quick ? 0.1 : 1;
const backlog = Number(values.backlog ?? (quick ? 50_000 : 1_000_000));
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

/**
 * The store's own calls, one after another, without a worker: enqueue two, claim (asking for more than there
 * is, so a claim also looks past priority 0), finish them. The least noisy view of the plain hot path.
 */
async function storeCycle({ client: c }: BenchContext, queue: string, n: number): Promise<number> {
  const request = { consumerId: 'bench', max: 4, lockMs: 30_000, accepts: null, eoqBackoffMs: () => 10 };
  return timed(async () => {
    for (let i = 0; i < n; i += 2) {
      await c.enqueueBatch(queue, [{ payload: { i } }, { payload: { i: i + 1 } }]);
      const { messages } = await storeOf(c).claim(queue, request);
      const finishes = messages.map((m) => ({
        id: m.id,
        attempt: m.attempt,
        outcome: 'success' as const,
        backoffMs: 0,
        error: null,
        startedAt: Date.now(),
      }));
      await storeOf(c).finish(queue, request.consumerId, finishes);
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

/** Enqueues n messages from `first` on; message i has priority i % spread (spread 1: all priority 0). */
async function fillPriorities(queue: string, first: number, n: number, spread: number): Promise<void> {
  for (let sent = 0; sent < n; sent += BATCH) {
    const size = Math.min(BATCH, n - sent);
    await client.enqueueBatch(
      queue,
      Array.from({ length: size }, (_, k) => {
        const i = first + sent + k;
        return { payload: { i, priority: i % spread }, priority: i % spread };
      }),
    );
  }
}

/** A worker handles `n` messages; returns µs per message handled, how many, and whether they came by priority. */
async function drain(queue: string, n: number): Promise<{ usPerMsg: number; handled: number; ordered: boolean }> {
  let handled = 0;
  let ordered = true;
  let last = -1;
  const enough = signal();
  const start = performance.now();
  const worker = client.worker(
    queue,
    (job) => {
      const { priority } = job.payload as { priority: number };
      // Concurrent handlers may finish a step apart; a claim never goes back more than one priority.
      if (priority < last - 1) ordered = false;
      last = Math.max(last, priority);
      handled += 1;
      if (handled === n) enough.fire();
    },
    { concurrency: DRAIN_CONCURRENCY },
  );
  await enough.promise;
  await worker.stop();
  return { usPerMsg: ((performance.now() - start) * 1000) / handled, handled, ordered };
}

interface DepthPoint {
  readonly spread: number;
  readonly size: number;
  readonly buildS: number;
  readonly usPerMsg: number;
  readonly ordered: boolean;
}

/**
 * Builds a queue of `size` over `spread` priorities, then `rounds` times drains PROBE messages (timed) and
 * enqueues as many again (untimed), so every drain sees the same depth.
 */
async function depthPoint(spread: number, size: number): Promise<DepthPoint> {
  const queue = ctx.queue(`depth-${spread}-${size}`);
  queues.push(queue);
  const buildMs = await timed(() => fillPriorities(queue, 0, size, spread));
  process.stderr.write(`bench: built ${whole.format(size)} messages over ${spread} priorities\n`);
  const samples: number[] = [];
  let ordered = true;
  let next = size;
  for (let r = 0; r < rounds; r++) {
    const result = await drain(queue, Math.min(PROBE, size / 2));
    samples.push(result.usPerMsg);
    ordered &&= result.ordered;
    await fillPriorities(queue, next, result.handled, spread);
    next += result.handled;
  }
  process.stderr.write(`bench: ${spread} priorities, ${size}: ${samples.map((us) => us.toFixed(0)).join(', ')} µs\n`);
  return { spread, size, buildS: buildMs / 1000, usPerMsg: median(samples), ordered };
}

async function priorityClaims(): Promise<string> {
  // Warm the paths on a queue of its own.
  await depthPoint(PRIORITIES, Math.min(SMALL, backlog));
  const rows: string[][] = [];
  const ratios: string[] = [];
  // Priority 0 only is the control: what depth alone costs on this machine now.
  for (const spread of [PRIORITIES, 1]) {
    const small = await depthPoint(spread, Math.min(SMALL, backlog));
    const large = await depthPoint(spread, backlog);
    for (const p of [small, large]) {
      rows.push([
        String(p.spread),
        whole.format(p.size),
        `${p.buildS.toFixed(1)} s`,
        `${p.usPerMsg.toFixed(1)} µs`,
        p.ordered ? 'yes' : 'NO',
      ]);
    }
    ratios.push(`${spread} priorities: large / small ${(large.usPerMsg / small.usPerMsg).toFixed(3)} ×`);
  }
  const header = ['priorities', 'queue depth', 'build', 'per message handled', 'by priority'];
  return `${table(header, rows, false)}\n${ratios.join('; ')} (target for 10: ≤ 1.5 ×)\n`;
}

try {
  const plain = await plainCosts();
  const priority = await priorityClaims();
  process.stdout.write(
    `${plain}\n${priority}store ${storeOf(client).kind}, median of ${rounds} rotating rounds (plain), ` +
      `of ${rounds} drains of ${Math.min(PROBE, backlog / 2)} at constant depth (priority)\n`,
  );
} finally {
  await client.clear(...queues);
  await baselineClient?.close();
  await client.close();
  if (tempDir !== null) rmSync(tempDir, { recursive: true, force: true });
}
