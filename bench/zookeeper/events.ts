/**
 * `node --import tsx bench/zookeeper/events.ts --store zookeeper://HOST:PORT [--n 4000] [--rounds 5]
 *   [--before DIR]`
 *
 * What queue events cost on ZooKeeper, side by side in one run: each round measures every variant in turn
 * (the order rotating from round to round), each on a fresh queue of a fresh chroot:
 * - enqueue: n single enqueues, 64 in flight;
 * - claim + finish: a worker at concurrency 64 handles those n (no-op handler), until all are done.
 * Variants: events off and events on, and with --before DIR (a copy of an older kvmq's src/, made with
 * `git archive <rev> src | tar -x -C DIR`, with node_modules linked) that kvmq with events off.
 * Prints the median time of each variant and the median of the per-round ratios to events off.
 */
import { parseArgs } from 'node:util';
import { join } from 'node:path';
import { ZkSession } from '../../src/zookeeper/client.js';
import { connect } from '../../src/index.js';
import { inFlight, median, signal, table, timed, whole } from '../common.js';

type Connect = typeof connect;

interface Variant {
  readonly name: string;
  readonly connect: Connect;
  readonly events: boolean;
}

const { values } = parseArgs({
  options: {
    store: { type: 'string' },
    n: { type: 'string', default: '4000' },
    rounds: { type: 'string', default: '5' },
    before: { type: 'string' },
  },
});
const server = (values.store ?? process.env.KVMQ_TEST_ZOOKEEPER_URL ?? '').replace(/\/+$/, '');
if (!server.startsWith('zookeeper://')) throw new Error('give --store zookeeper://HOST:PORT');
const hosts = server.slice('zookeeper://'.length).replace(/\/.*$/, '');
const n = Number(values.n);
const rounds = Number(values.rounds);

const variants: Variant[] = [
  { name: 'events off', connect, events: false },
  { name: 'events on', connect, events: true },
];
if (values.before !== undefined) {
  const older = (await import(join(values.before, 'src/index.ts'))) as { connect: Connect };
  variants.push({ name: 'before (no events)', connect: older.connect, events: false });
}

let chroots = 0;
async function freshUrl(): Promise<string> {
  const zk = await ZkSession.open({
    hosts,
    chroot: '',
    auth: null,
    sessionTimeoutMs: 10_000,
    requestTimeoutMs: 30_000,
  });
  const name = `kvmq-bench-events-${process.pid}-${++chroots}`;
  try {
    await zk.create(`/${name}`);
  } finally {
    zk.close();
  }
  return `zookeeper://${hosts}/${name}`;
}

async function measure(variant: Variant, count: number): Promise<{ enqueue: number; lifecycle: number }> {
  const client = await variant.connect(await freshUrl(), { maintenance: false });
  try {
    const queue = 'bench';
    await client.configure(queue, { events: variant.events });
    const enqueue = await timed(() => inFlight(count, 64, (i) => client.enqueue(queue, { i })));
    let handled = 0;
    const all = signal();
    const start = performance.now();
    const worker = client.worker(
      queue,
      () => {
        handled += 1;
        if (handled === count) all.fire();
      },
      { concurrency: 64 },
    );
    await all.promise;
    await worker.stop();
    return { enqueue, lifecycle: performance.now() - start };
  } finally {
    await client.close();
  }
}

// Warm-up: each variant once, not counted.
for (const variant of variants) await measure(variant, Math.ceil(n / 4));
const times = new Map(variants.map((v) => [v.name, { enqueue: [] as number[], lifecycle: [] as number[] }]));
const ratios = new Map(variants.map((v) => [v.name, { enqueue: [] as number[], lifecycle: [] as number[] }]));
for (let round = 0; round < rounds; round++) {
  const order = variants.map((_, k) => variants[(k + round) % variants.length] as Variant);
  const figures = new Map<string, { enqueue: number; lifecycle: number }>();
  for (const variant of order) figures.set(variant.name, await measure(variant, n));
  const base = figures.get('events off');
  for (const [name, figure] of figures) {
    times.get(name)?.enqueue.push(figure.enqueue);
    times.get(name)?.lifecycle.push(figure.lifecycle);
    if (base === undefined) continue;
    ratios.get(name)?.enqueue.push(figure.enqueue / base.enqueue);
    ratios.get(name)?.lifecycle.push(figure.lifecycle / base.lifecycle);
  }
  process.stderr.write(`round ${round + 1}/${rounds} done\n`);
}

const rows = variants.map((v) => {
  const t = times.get(v.name) ?? { enqueue: [], lifecycle: [] };
  const r = ratios.get(v.name) ?? { enqueue: [], lifecycle: [] };
  return [
    v.name,
    `${whole.format((n * 1000) / median(t.enqueue))} /s`,
    `×${median(r.enqueue).toFixed(3)}`,
    `${whole.format((n * 1000) / median(t.lifecycle))} /s`,
    `×${median(r.lifecycle).toFixed(3)}`,
  ];
});
process.stdout.write(
  `${n} messages, ${rounds} rounds (median); ratio: time over events off in the same round (median of rounds)\n`,
);
process.stdout.write(
  table(
    ['variant', 'enqueue (64 in flight)', 'enqueue time ratio', 'claim + finish (c=64)', 'claim + finish time ratio'],
    rows,
    true,
  ),
);
