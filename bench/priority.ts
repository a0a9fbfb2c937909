/**
 * `node --import tsx bench/priority.ts [--store URL] [--large N] [--small N] [--probe N] [--rounds N]
 *   [--priorities N] [--run N] [--claims-only] [--quick]`
 *
 * What priorities cost a claim, and what they cost messages that do not use them, measured side by side in
 * one process, on any store:
 * - claim cost at depth (issue 13): a small queue (default 10,000) and a large one (default 1,000,000), both
 *   fed by the same arrival stream over 10 priorities (`--priorities`), one at a time in turn (`--run`: that
 *   many of one priority in a row), so the urgent messages sit among the others. A worker (64 handlers)
 *   drains `probe` (5,000) messages from each, alternating which goes first round by round, and each queue
 *   is topped up from its stream between rounds, so its size and layout stay put. Target: large within
 *   1.5 × of small per message. `--priorities 1` is the control: what depth alone costs.
 * - plain cost (skipped with `--claims-only`): enqueue (batches of 1000) and the lifecycle (enqueue, claim,
 *   finish) of messages without a priority beside the same with `priority: 0` given.
 * Every drained message is checked to be of the highest priorities waiting, so a fast wrong order cannot pass.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { connect, type BatchItem, type Client } from '../src/index.js';
import { median, short, signal, step, table, timed, whole } from './common.js';
import { storeOf } from '../src/client/client-store.js';

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
    priorities: { type: 'string' },
    run: { type: 'string' },
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
// 10 levels by default; `--priorities 1` (all priority 0) is the control: what depth alone costs.
const levels = Number(values.priorities ?? 10);
// Messages of one priority in a row in the arrival stream: 1 (default) interleaves them, as producers of mixed
// urgency would; 1000 lays each level out in blocks of 1000 rows.
const runLength = Number(values.run ?? 1);
for (const [flag, n] of [
  ['--priorities', levels],
  ['--run', runLength],
] as const) {
  if (!Number.isInteger(n) || n < 1) throw new TypeError(`${flag} must be a whole number ≥ 1, not ${n}`);
}

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

/** Message i of a queue's arrival stream: priorities 0, 100, ..., (levels - 1) × 100 in turn, `runLength` each. */
function item(i: number): BatchItem {
  return { payload: { i }, priority: (Math.floor(i / runLength) % levels) * PRIORITY_STEP };
}

/**
 * A queue under test and what it holds per priority level. Fills and refills continue one arrival stream, so
 * every level keeps its messages spread among the others' at the same density whatever the queue's size: a
 * refill in blocks would lay the small queue's rows out contiguously after its first drain while the large
 * queue's stay spread, and the two would then differ by layout, not by depth.
 */
class SpreadQueue {
  private next = 0;
  private readonly counts = new Map<number, number>();

  constructor(
    readonly name: string,
    readonly size: number,
  ) {}

  async add(c: Client, n: number): Promise<void> {
    for (let sent = 0; sent < n; sent += BATCH) {
      const size = Math.min(BATCH, n - sent);
      const items = Array.from({ length: size }, (_, k) => item(this.next + k));
      this.next += size;
      for (const it of items) this.count(it.priority ?? 0, 1);
      await c.enqueueBatch(this.name, items);
    }
  }

  private count(priority: number, by: number): void {
    this.counts.set(priority, (this.counts.get(priority) ?? 0) + by);
  }

  /** A drain took these priorities: they leave the counts. */
  took(priorities: readonly number[]): void {
    for (const p of priorities) this.count(p, -1);
  }

  /** The highest priority a drain of n messages in priority order may reach. */
  limit(n: number): number {
    let seen = 0;
    for (let level = 0; level < levels; level += 1) {
      seen += this.counts.get(level * PRIORITY_STEP) ?? 0;
      if (seen >= n) return level * PRIORITY_STEP;
    }
    return (levels - 1) * PRIORITY_STEP;
  }
}

/** A worker takes at least n messages; returns the time per message and the priorities it saw. */
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

/** The drain took the highest priorities first: none beyond the level where the queue held enough. */
function checkOrder(q: SpreadQueue, priorities: readonly number[]): void {
  const worst = Math.max(...priorities);
  const limit = q.limit(priorities.length);
  if (priorities.includes(-1) || worst > limit) {
    throw new Error(`${q.name}: drained a priority-${worst} message before higher ones (allowed up to ${limit})`);
  }
}

interface ClaimFigures {
  readonly small: number[];
  readonly large: number[];
}

async function claimCost(): Promise<ClaimFigures> {
  const queues = {
    small: new SpreadQueue(queue(`small-${short(small)}`), small),
    large: new SpreadQueue(queue(`large-${short(large)}`), large),
  };
  for (const q of Object.values(queues)) {
    await step(`fill ${short(q.size)} over ${levels} priorities`, () => q.add(client, q.size));
  }
  const figures: ClaimFigures = { small: [], large: [] };
  const one = async (label: 'small' | 'large'): Promise<void> => {
    const q = queues[label];
    const { usPerMsg, priorities } = await drain(client, q.name, probe);
    checkOrder(q, priorities);
    q.took(priorities);
    figures[label].push(usPerMsg);
    // Untimed: the queue back to its size, from the same arrival stream.
    await q.add(client, priorities.length);
  };
  // Warm-up on each, then rounds that alternate which goes first.
  await step('warm-up drains', async () => {
    await one('small');
    await one('large');
    figures.small.length = 0;
    figures.large.length = 0;
  });
  for (let round = 0; round < rounds; round += 1) {
    await step(`round ${round + 1}: drain ${probe} from each`, async () => {
      const order: ('small' | 'large')[] = round % 2 === 0 ? ['small', 'large'] : ['large', 'small'];
      for (const label of order) await one(label);
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
    `store ${storeOf(client).kind}, median of ${rounds} alternating rounds`,
    '',
    table(
      ['queue', 'messages', 'priorities', 'drained', 'µs/message', 'runs (µs/message)'],
      [
        [
          'small',
          whole.format(small),
          String(levels),
          whole.format(probe),
          smallUs.toFixed(1),
          claims.small.map((v) => v.toFixed(1)).join(', '),
        ],
        [
          'large',
          whole.format(large),
          String(levels),
          whole.format(probe),
          largeUs.toFixed(1),
          claims.large.map((v) => v.toFixed(1)).join(', '),
        ],
      ],
      false,
    ),
    `claim cost large/small: ${ratio.toFixed(3)} × (target ≤ 1.5 ×: ${ratio <= 1.5 ? 'ok' : 'FAIL'})`,
    // Each round's two drains ran back to back: their ratio is free of the drift between rounds.
    `paired rounds large/small: median ${median(claims.large.map((us, r) => us / (claims.small[r] ?? NaN))).toFixed(3)} ×`,
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
