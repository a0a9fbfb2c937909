/**
 * `node --import tsx bench/priority.ts [--store URL] [--large N] [--small N] [--probe N] [--rounds N] [--quick]
 *   [--claims-only]`
 *
 * What priorities cost a claim, and what they cost messages that do not use them, measured side by side in
 * one process:
 * - claim cost: a small queue (default 10,000) and a large one (default 1,000,000), each spread over 10
 *   priorities in interleaved order, so the urgent messages sit among the others; a worker (64 handlers)
 *   drains `probe` (5,000) messages from each, alternating round by round, and the queues are topped up
 *   between rounds so their size stays put. The target: large within 1.5 × of small per message.
 * - plain cost: enqueue (batches of 1000) and the lifecycle (enqueue, claim, finish) of messages without a
 *   priority beside the same with `priority: 0` given: the default path must cost what an explicit 0 does.
 * Every drained message is checked to be of the highest priority waiting, so a fast wrong order cannot pass.
 * `--claims-only` measures the claim cost alone.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { connect, type BatchItem, type Client } from '../src/index.js';
import { median, short, signal, step, table, timed, whole } from './common.js';

const PRIORITIES = 10;
// Priorities 0, 100, ..., 900: spread over the range, as real levels would be.
const PRIORITY_STEP = 100;
const BATCH = 1000;
// As in the backlog measurement: the draining worker runs 64 handlers at once.
const DRAIN_CONCURRENCY = 64;

const { values } = parseArgs({
  options: {
    store: { type: 'string' },
    large: { type: 'string' },
    small: { type: 'string' },
    probe: { type: 'string' },
    rounds: { type: 'string' },
    quick: { type: 'boolean' },
    'claims-only': { type: 'boolean' },
  },
});
const quick = values.quick === true;
const large = Number(values.large ?? (quick ? 50_000 : 1_000_000));
const small = Number(values.small ?? (quick ? 5000 : 10_000));
// Half the small queue: long enough that a worker's start and stop weigh little, short enough that the
// small queue never runs low during a drain.
const probe = Number(values.probe ?? (quick ? 500 : 5000));
const rounds = Number(values.rounds ?? (quick ? 1 : 5));
const plainN = quick ? 5000 : 50_000;

const tempDir = values.store === undefined ? mkdtempSync(join(tmpdir(), 'kvmq-bench-priority-')) : null;
const url = values.store ?? `sqlite:${join(tempDir ?? '', 'bench.db')}`;
const client = await connect(url);
const runId = Date.now().toString(36);
const queues: string[] = [];
function queue(label: string): string {
  const name = `bench-priority-${runId}-${label}`;
  queues.push(name);
  return name;
}

/** Message i of a queue: priorities 0, 100, ..., 900 in turn. */
function item(i: number): BatchItem {
  return { payload: { i }, priority: (i % PRIORITIES) * PRIORITY_STEP };
}

async function fillSpread(c: Client, q: string, from: number, n: number): Promise<void> {
  for (let sent = 0; sent < n; sent += BATCH) {
    const size = Math.min(BATCH, n - sent);
    await c.enqueueBatch(
      q,
      Array.from({ length: size }, (_, k) => item(from + sent + k)),
    );
  }
}

/** Tops the queue up with `n` messages of the priorities a drain took, so each level keeps its count. */
async function refill(c: Client, q: string, taken: readonly number[]): Promise<void> {
  for (let sent = 0; sent < taken.length; sent += BATCH) {
    await c.enqueueBatch(
      q,
      taken.slice(sent, sent + BATCH).map((priority) => ({ payload: { refill: true }, priority })),
    );
  }
}

/** A worker takes at least n messages; returns the time per message and the priorities it saw, in order. */
async function drain(c: Client, q: string, n: number): Promise<{ usPerMsg: number; priorities: number[] }> {
  const priorities: number[] = [];
  const ids: string[] = [];
  const enough = signal();
  const start = performance.now();
  const worker = c.worker(
    q,
    (job) => {
      ids.push(job.id);
      if (ids.length === n) enough.fire();
    },
    { concurrency: DRAIN_CONCURRENCY },
  );
  await enough.promise;
  await worker.stop();
  const ms = performance.now() - start;
  // Untimed: the priority of each message handled, from the store.
  for (const id of ids) priorities.push((await c.show(q, id))?.priority ?? -1);
  return { usPerMsg: (ms * 1000) / ids.length, priorities };
}

/** The drain took the highest priorities first: each level holds `perLevel`, so n messages span ⌈n / perLevel⌉. */
function checkOrder(label: string, priorities: readonly number[], perLevel: number): void {
  const worst = Math.max(...priorities);
  const limit = (Math.ceil(priorities.length / perLevel) - 1) * PRIORITY_STEP;
  if (priorities.includes(-1) || worst > limit) {
    throw new Error(`${label}: drained a priority-${worst} message before higher ones (allowed up to ${limit})`);
  }
}

interface ClaimFigures {
  readonly small: number[];
  readonly large: number[];
}

async function claimCost(): Promise<ClaimFigures> {
  const smallQ = queue(`small-${short(small)}`);
  const largeQ = queue(`large-${short(large)}`);
  await step(`fill ${short(small)} over ${PRIORITIES} priorities`, () => fillSpread(client, smallQ, 0, small));
  await step(`fill ${short(large)} over ${PRIORITIES} priorities`, () => fillSpread(client, largeQ, 0, large));
  const figures: ClaimFigures = { small: [], large: [] };
  const one = async (label: 'small' | 'large', q: string, size: number): Promise<void> => {
    const { usPerMsg, priorities } = await drain(client, q, probe);
    checkOrder(label, priorities, size / PRIORITIES);
    figures[label].push(usPerMsg);
    await refill(client, q, priorities);
  };
  // Warm-up on each, then rounds that alternate which goes first.
  await step('warm-up drains', async () => {
    await one('small', smallQ, small);
    await one('large', largeQ, large);
    figures.small.length = 0;
    figures.large.length = 0;
  });
  for (let round = 0; round < rounds; round += 1) {
    await step(`round ${round + 1}: drain ${probe} from each`, async () => {
      if (round % 2 === 0) {
        await one('small', smallQ, small);
        await one('large', largeQ, large);
      } else {
        await one('large', largeQ, large);
        await one('small', smallQ, small);
      }
    });
  }
  return figures;
}

type Variant = 'plain' | 'priority 0';

function plainItems(variant: Variant, from: number, size: number): BatchItem[] {
  return Array.from({ length: size }, (_, k) =>
    variant === 'plain' ? { payload: { i: from + k } } : { payload: { i: from + k }, priority: 0 },
  );
}

async function fillPlain(q: string, variant: Variant, n: number): Promise<void> {
  for (let sent = 0; sent < n; sent += BATCH) {
    await client.enqueueBatch(q, plainItems(variant, sent, Math.min(BATCH, n - sent)));
  }
}

/** As bench/lifecycle.ts: one worker (64 handlers) takes n messages while they are enqueued; ms until all done. */
async function lifecycleRun(q: string, variant: Variant, n: number): Promise<number> {
  let handled = 0;
  const all = signal();
  const start = performance.now();
  const worker = client.worker(
    q,
    () => {
      handled += 1;
      if (handled === n) all.fire();
    },
    { concurrency: DRAIN_CONCURRENCY },
  );
  await fillPlain(q, variant, n);
  await all.promise;
  await worker.stop();
  return performance.now() - start;
}

async function plainCost(): Promise<string[][]> {
  const rows: string[][] = [];
  const cases: [string, (q: string, v: Variant) => Promise<number>][] = [
    ['enqueue, batches of 1000', (q, v) => timed(() => fillPlain(q, v, plainN))],
    ['lifecycle, concurrency 64', (q, v) => lifecycleRun(q, v, plainN)],
  ];
  let made = 0;
  for (const [label, run] of cases) {
    const times: Record<Variant, number[]> = { plain: [], 'priority 0': [] };
    const variants: Variant[] = ['plain', 'priority 0'];
    await step(`${label}: plain vs priority 0`, async () => {
      for (const v of variants) await run(queue(`plain-${(made += 1)}`), v); // warm-up
      for (let round = 0; round < rounds; round += 1) {
        for (let k = 0; k < variants.length; k += 1) {
          const v = variants[(round + k) % variants.length] ?? 'plain';
          times[v].push(await run(queue(`plain-${(made += 1)}`), v));
        }
      }
    });
    const perSec = (v: Variant): string => whole.format((plainN * 1000) / median(times[v]));
    rows.push([
      label,
      whole.format(plainN),
      perSec('plain'),
      perSec('priority 0'),
      `${(median(times.plain) / median(times['priority 0'])).toFixed(3)} ×`,
    ]);
  }
  return rows;
}

try {
  const claims = await claimCost();
  const smallUs = median(claims.small);
  const largeUs = median(claims.large);
  const ratio = largeUs / smallUs;
  const plainRows = values['claims-only'] === true ? [] : await plainCost();
  const out = [
    `store ${client.store.kind}, median of ${rounds} alternating rounds`,
    '',
    table(
      ['queue', 'messages', 'priorities', 'drained', 'µs/message', 'runs (µs/message)'],
      [
        [
          'small',
          whole.format(small),
          String(PRIORITIES),
          whole.format(probe),
          smallUs.toFixed(1),
          claims.small.map((v) => v.toFixed(1)).join(', '),
        ],
        [
          'large',
          whole.format(large),
          String(PRIORITIES),
          whole.format(probe),
          largeUs.toFixed(1),
          claims.large.map((v) => v.toFixed(1)).join(', '),
        ],
      ],
      false,
    ),
    `claim cost large/small: ${ratio.toFixed(3)} × (target ≤ 1.5 ×: ${ratio <= 1.5 ? 'ok' : 'FAIL'})`,
    '',
    ...(plainRows.length === 0
      ? []
      : [table(['measurement', 'messages', 'plain /s', 'priority 0 /s', 'time plain/explicit'], plainRows, false), '']),
  ];
  process.stdout.write(out.join('\n'));
} finally {
  await client.clear(...queues);
  await client.close();
  if (tempDir !== null) rmSync(tempDir, { recursive: true, force: true });
}
