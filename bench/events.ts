/**
 * `node --import tsx bench/events.ts [--store URL] [--rounds N] [--quick] [--baseline DIR]`
 *
 * What queue events cost: enqueue and the full lifecycle on queues with events off and on, side by side
 * in the same process, the two alternating run by run (each on a fresh queue), medians of the rounds.
 * `--baseline DIR` (another checkout of kvmq, e.g. from `git archive`) also runs events off on that
 * checkout's client, in the same rounds, to show events off costs what it did before.
 * The targets: with events on, at most 1.15 × the time without; with them off, within 5 %.
 * Each run's CPU time of this process is shown beside: on SQLite the store runs in it, and on a loaded machine
 * CPU time moves less than wall time (it does not count the waits for a core).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { connect, type Client } from '../src/index.js';
import { median, table, whole, type BenchContext, type BenchSizes } from './common.js';
import { batched, single } from './enqueue.js';
import { runLifecycle } from './lifecycle.js';
import { storeOf } from '../src/client-store.js';

interface Case {
  readonly label: string;
  readonly n: number;
  readonly run: (ctx: BenchContext, queue: string, n: number) => Promise<number>;
  /** Events kept with events on (the default 10,000 if absent). */
  readonly eventsMaxCount?: number;
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
  { label: 'enqueue, single (64 in flight)', n: 5000 * scale, run: single },
  { label: 'enqueue, batches of 1000', n: 50_000 * scale, run: batched },
  { label: 'lifecycle, concurrency 1', n: 3000 * scale, run: (ctx, q, n) => runLifecycle(ctx, q, 1, n) },
  // The runs above keep fewer events than the default bound; here the bound is reached early, so most
  // transactions write into a queue at its bound and trimming by count runs all along, as on a busy queue.
  {
    label: 'lifecycle, concurrency 1, 1,000 events kept',
    n: 3000 * scale,
    run: (ctx, q, n) => runLifecycle(ctx, q, 1, n),
    eventsMaxCount: 1000,
  },
  { label: 'lifecycle, concurrency 64', n: 30_000 * scale, run: (ctx, q, n) => runLifecycle(ctx, q, 64, n) },
];

const tempDir = values.store === undefined ? mkdtempSync(join(tmpdir(), 'kvmq-bench-events-')) : null;
const url = values.store ?? `sqlite:${join(tempDir ?? '', 'bench.db')}`;
const client = await connect(url);
// The baseline's client speaks the same public API; only connect is needed from it. On the default SQLite
// store it gets a file of its own (an older kvmq refuses a newer schema).
type Connect = (url: string) => Promise<Client>;
const baselineUrl = tempDir === null ? url : `sqlite:${join(tempDir, 'baseline.db')}`;
const baselineClient =
  values.baseline === undefined
    ? null
    : await ((await import(join(values.baseline, 'src/index.ts'))) as { connect: Connect }).connect(baselineUrl);
const runId = Date.now().toString(36);
// Only batchSize is read by the runs measured here.
const sizes = { batchSize: 1000 } as BenchSizes;
const ctx: BenchContext = { client, sizes, queue: (label) => `bench-events-${runId}-${label}` };
const queues: string[] = [];
let made = 0;

type Variant = 'off' | 'on' | 'baseline';

/** Times one run on a fresh queue: events off or on, or off on the baseline's client; wall and CPU ms. */
async function once(c: Case, variant: Variant): Promise<[ms: number, cpuMs: number]> {
  const queue = ctx.queue(`${(made += 1)}-${variant}`);
  queues.push(queue);
  const on = variant === 'baseline' && baselineClient !== null ? baselineClient : client;
  if (variant === 'off') await on.configure(queue, { events: false });
  if (variant === 'on') await on.configure(queue, { events: true, eventsMaxCount: c.eventsMaxCount ?? 10_000 });
  const cpu = process.cpuUsage();
  const ms = await c.run({ ...ctx, client: on }, queue, c.n);
  const { user, system } = process.cpuUsage(cpu);
  return [ms, (user + system) / 1000];
}

try {
  const rows: string[][] = [];
  const variants: Variant[] = baselineClient === null ? ['off', 'on'] : ['off', 'on', 'baseline'];
  for (const c of cases) {
    for (const variant of variants) await once(c, variant); // warm-up
    const times = new Map<Variant, number[]>(variants.map((v) => [v, []]));
    const cpus = new Map<Variant, number[]>(variants.map((v) => [v, []]));
    for (let round = 0; round < rounds; round++) {
      // Rotating which goes first spreads the machine's drift over all.
      for (let k = 0; k < variants.length; k++) {
        const variant = variants[(round + k) % variants.length] ?? 'off';
        const [ms, cpuMs] = await once(c, variant);
        times.get(variant)?.push(ms);
        cpus.get(variant)?.push(cpuMs);
      }
    }
    const ms = (v: Variant): number => median(times.get(v) ?? []);
    const cpu = (v: Variant): number => median(cpus.get(v) ?? []);
    const perSec = (v: Variant): string => whole.format((c.n * 1000) / ms(v));
    const ratio = (a: number, b: number): string => `${(a / b).toFixed(3)} ×`;
    const row = [c.label, whole.format(c.n), perSec('off'), perSec('on'), ratio(ms('on'), ms('off'))];
    row.push(ratio(cpu('on'), cpu('off')));
    if (baselineClient !== null) {
      row.push(perSec('baseline'), ratio(ms('off'), ms('baseline')), ratio(cpu('off'), cpu('baseline')));
    }
    rows.push(row);
    const list = (values: number[] | undefined): string => (values ?? []).map(Math.round).join(', ');
    const spread = variants.map((v) => `${v} ${list(times.get(v))} ms (CPU ${list(cpus.get(v))})`);
    process.stderr.write(`bench: ${c.label}: ${spread.join('; ')}\n`);
  }
  const header = ['measurement', 'messages', 'events off /s', 'events on /s', 'time on/off', 'CPU on/off'];
  if (baselineClient !== null) header.push('baseline off /s', 'time off/baseline', 'CPU off/baseline');
  process.stdout.write(
    `${table(header, rows, false)}\nstore ${storeOf(client).kind}, median of ${rounds} rotating rounds\n`,
  );
} finally {
  await client.clear(...queues);
  await baselineClient?.close();
  await client.close();
  if (tempDir !== null) rmSync(tempDir, { recursive: true, force: true });
}
