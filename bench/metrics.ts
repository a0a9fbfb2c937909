/**
 * `node --import tsx bench/metrics.ts --store URL [--backlog N] [--runs N] [--lifecycle N] [--skip-lifecycle]`
 *
 * What metrics cost. (1) A scrape: a queue holds a backlog of N queued messages (1,000,000); times
 * `registry.metrics()` of `client.metrics({ queues: [queue] })` (median and slowest of `runs` scrapes after
 * one untimed), against issue 12's target of 50 ms. (2) The worker's hot path: the lifecycle measurement
 * (bench/lifecycle.ts: enqueue N while one worker takes them) on a client without metrics and on one with
 * `client.metrics()` attached, side by side (in the order A B B A), at concurrency 1 and 64. Prints markdown rows.
 */
import { parseArgs } from 'node:util';
import { connect, type Client } from '../src/index.js';
import { fill, lifecycleSizes, sampleMs, quantile, timed, whole, type BenchContext } from './common.js';
import { measureLifecycle } from './lifecycle.js';
import { createWorkerMetrics } from '../src/metrics/registry.js';
import { storeOf } from '../src/client/client-store.js';

const { values } = parseArgs({
  options: {
    store: { type: 'string' },
    backlog: { type: 'string', default: '1000000' },
    runs: { type: 'string', default: '20' },
    lifecycle: { type: 'string', default: '10000' },
    'skip-lifecycle': { type: 'boolean', default: false },
  },
});
const backlog = Number(values.backlog);
const runs = Number(values.runs);
const lifecycleN = Number(values.lifecycle);
const tag = Date.now().toString(36);
/** Lifecycle queues made so far: each run gets a queue of its own. */
let queues = 0;

const plain = await connect(values.store, { maintenance: false });
const measured = await connect(values.store, { maintenance: false });
const kind = storeOf(plain).kind;
try {
  const queue = `bench-metrics-${tag}`;
  process.stderr.write(`${kind}: a backlog of ${whole.format(backlog)} queued messages...\n`);
  const buildMs = await timed(() => fill(plain, queue, backlog, 1000));
  process.stderr.write(`${kind}: built in ${(buildMs / 1000).toFixed(1)} s; scraping\n`);
  const registry = await measured.metrics({ queues: [queue] });
  const expected = `kvmq_queue_messages{queue="${queue}",state="queued"} ${backlog}\n`;
  const scrape = await sampleMs(runs, async () => {
    const text = await registry.metrics();
    if (!text.includes(expected)) throw new Error(`the scrape did not count ${backlog} queued:\n${text}`);
  });
  const [median, slowest] = scrape;
  console.log(
    `| ${kind} | scrape with ${whole.format(backlog)} queued | ${median.toFixed(2)} ms | ${slowest.toFixed(2)} ms | ` +
      `≤ 50 ms: ${median <= 50 ? 'ok' : 'missed'} |`,
  );
  await plain.clear(queue);

  console.log(`| ${kind} | the instruments' own cost per message | ${(await instrumentsNs()).toFixed(0)} ns | | |`);

  if (!values['skip-lifecycle']) {
    for (const concurrency of [1, 64]) {
      // A, B, B, A: a machine that speeds up or slows down during the run favours neither side.
      const a1 = await lifecycle(plain, concurrency, 'plain');
      const b1 = await lifecycle(measured, concurrency, 'measured');
      const b2 = await lifecycle(measured, concurrency, 'measured');
      const a2 = await lifecycle(plain, concurrency, 'plain');
      const mean = (x: Lifecycle, y: Lifecycle): Lifecycle => ({
        perSec: (x.perSec + y.perSec) / 2,
        cpuUsPerMessage: (x.cpuUsPerMessage + y.cpuUsPerMessage) / 2,
      });
      const without = mean(a1, a2);
      const withMetrics = mean(b1, b2);
      const cell = (x: Lifecycle): string => `${whole.format(x.perSec)} /s, ${x.cpuUsPerMessage.toFixed(1)} µs CPU`;
      const change = (x: number, y: number): string => `${y >= x ? '+' : ''}${(((y - x) / x) * 100).toFixed(1)} %`;
      console.log(
        `| ${kind} | lifecycle c${concurrency}, ${whole.format(lifecycleN)} messages | ${cell(without)} | ` +
          `${cell(withMetrics)} | ${change(without.perSec, withMetrics.perSec)}, ` +
          `CPU ${change(without.cpuUsPerMessage, withMetrics.cpuUsPerMessage)} |`,
      );
    }
  }
} finally {
  await Promise.all([plain.close(), measured.close()]);
}

interface Lifecycle {
  readonly perSec: number;
  /** This process's CPU time (user + system) per message, warm-up included. */
  readonly cpuUsPerMessage: number;
}

/** The lifecycle run (median of 3, after a warm-up of a tenth) on this client. */
async function lifecycle(client: Client, concurrency: number, label: string): Promise<Lifecycle> {
  const sizes = lifecycleSizes(lifecycleN, 3);
  const ctx: BenchContext = { client, sizes, queue: (name) => `bench-metrics-${tag}-${label}-${name}-${++queues}` };
  process.stderr.write(`${kind}: lifecycle c${concurrency} ${label}\n`);
  const cpu = process.cpuUsage();
  const { perSec } = await measureLifecycle(ctx, concurrency, lifecycleN);
  const used = process.cpuUsage(cpu);
  const messages = lifecycleN * (sizes.runs + sizes.warmFraction);
  return { perSec, cpuUsPerMessage: (used.user + used.system) / messages };
}

/**
 * What the worker's instruments cost per message when attached, alone: a claim of one, a handler end, a
 * finish and an outcome, as the worker calls them (median of 5 rounds of 200,000).
 */
async function instrumentsNs(): Promise<number> {
  const metrics = await createWorkerMetrics(() => []);
  const queue = 'bench-instruments';
  metrics.startQueue(queue);
  const n = 200_000;
  const rounds: number[] = [];
  for (let round = 0; round < 6; round++) {
    const start = performance.now();
    for (let i = 0; i < n; i++) {
      metrics.claimed(queue, 0.0004, 1);
      metrics.handlerEnded(queue, 0.002);
      metrics.finished(queue, 0.0006);
      metrics.handled(queue, 'success');
    }
    // The first round warms the JIT.
    if (round > 0) rounds.push(((performance.now() - start) * 1e6) / n);
  }
  rounds.sort((a, b) => a - b);
  return quantile(rounds, 0.5);
}
