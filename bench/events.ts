/**
 * `node --import tsx bench/events.ts [--store URL] [--rounds N] [--quick]`
 *
 * What queue events cost: enqueue and the full lifecycle on queues with events off and on, side by side
 * in the same process, the two alternating run by run (each on a fresh queue), medians of the rounds.
 * The target: with events on, at most 1.15 × the time without.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { connect } from '../src/index.js';
import { median, table, whole, type BenchContext, type BenchSizes } from './common.js';
import { batched, single } from './enqueue.js';
import { runLifecycle } from './lifecycle.js';

interface Case {
  readonly label: string;
  readonly n: number;
  readonly run: (ctx: BenchContext, queue: string, n: number) => Promise<number>;
}

const { values } = parseArgs({
  options: { store: { type: 'string' }, rounds: { type: 'string' }, quick: { type: 'boolean' } },
});
const quick = values.quick === true;
const rounds = Number(values.rounds ?? (quick ? 1 : 5));
const scale = quick ? 0.1 : 1;
const cases: Case[] = [
  { label: 'enqueue, single (64 in flight)', n: 5000 * scale, run: single },
  { label: 'enqueue, batches of 1000', n: 50_000 * scale, run: batched },
  { label: 'lifecycle, concurrency 1', n: 3000 * scale, run: (ctx, q, n) => runLifecycle(ctx, q, 1, n) },
  { label: 'lifecycle, concurrency 64', n: 30_000 * scale, run: (ctx, q, n) => runLifecycle(ctx, q, 64, n) },
];

const tempDir = values.store === undefined ? mkdtempSync(join(tmpdir(), 'kvmq-bench-events-')) : null;
const url = values.store ?? `sqlite:${join(tempDir ?? '', 'bench.db')}`;
const client = await connect(url);
const runId = Date.now().toString(36);
// Only batchSize is read by the runs measured here.
const sizes = { batchSize: 1000 } as BenchSizes;
const ctx: BenchContext = { client, sizes, queue: (label) => `bench-events-${runId}-${label}` };
const queues: string[] = [];
let made = 0;

/** Times one run on a fresh queue configured with events off or on. */
async function once(c: Case, events: boolean): Promise<number> {
  const queue = ctx.queue(`${(made += 1)}-${events ? 'on' : 'off'}`);
  queues.push(queue);
  await client.configure(queue, { events });
  return c.run(ctx, queue, c.n);
}

try {
  const rows: string[][] = [];
  for (const c of cases) {
    await once(c, false); // warm-up
    await once(c, true);
    const off: number[] = [];
    const on: number[] = [];
    for (let round = 0; round < rounds; round++) {
      // Alternating which goes first spreads the machine's drift over both.
      const order = round % 2 === 0 ? [false, true] : [true, false];
      for (const events of order) (events ? on : off).push(await once(c, events));
    }
    const [offMs, onMs] = [median(off), median(on)];
    const perSec = (ms: number): string => whole.format((c.n * 1000) / ms);
    rows.push([c.label, whole.format(c.n), perSec(offMs), perSec(onMs), `${(onMs / offMs).toFixed(3)} ×`]);
    process.stderr.write(
      `bench: ${c.label}: off ${off.map(Math.round).join(', ')} ms; on ${on.map(Math.round).join(', ')} ms\n`,
    );
  }
  process.stdout.write(
    `${table(['measurement', 'messages', 'events off /s', 'events on /s', 'time on/off'], rows, false)}\n` +
      `store ${client.store.kind}, median of ${rounds} alternating rounds\n`,
  );
} finally {
  await client.clear(...queues);
  await client.close();
  if (tempDir !== null) rmSync(tempDir, { recursive: true, force: true });
}
