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
 * Prints, per variant, the median rate and the median of the per-round ratios to events off: of the time, and
 * of the CPU spent per message by this process plus the ZooKeeper server (found by its port with `ss`, read
 * from /proc), which a loaded machine disturbs less than the time; and the write operations sent per message,
 * which it does not disturb at all.
 * Then the cost of a read with `--kept` events kept (default 10,000, the default eventsMaxCount), written by
 * batches of 1,000 (a node each) and one by one (a node per event, the most nodes there can be): a page of 100
 * from the oldest, a page of 100 at the newest (a live reader's), and eventsHead.
 */
import { execFileSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import { join } from 'node:path';
import { ZkSession } from '../../src/stores/zookeeper/client.js';
import { connect } from '../../src/index.js';
import { fill, inFlight, median, signal, table, timed, whole } from '../common.js';
import { cpuMs as processCpuMs } from '../process-cpu.js';
import { storeOf } from '../../src/client/client-store.js';

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
    kept: { type: 'string', default: '10000' },
  },
});
const server = (values.store ?? process.env.KVMQ_TEST_ZOOKEEPER_URL ?? '').replace(/\/+$/, '');
if (!server.startsWith('zookeeper://')) throw new Error('give --store zookeeper://HOST:PORT');
const hosts = server.slice('zookeeper://'.length).replace(/\/.*$/, '');
const n = Number(values.n);
const port = hosts.split(',')[0]?.split(':')[1] ?? '2181';
const serverPid = /pid=(\d+)/.exec(execFileSync('ss', ['-ltnpH', `sport = :${port}`], { encoding: 'utf8' }))?.[1];
if (serverPid === undefined) throw new Error(`no process of this user listens on port ${port} (ss -ltnp)`);

/** CPU ms of this process and of the ZooKeeper server so far. */
function cpuMs(): number {
  const own = process.cpuUsage();
  return (own.user + own.system) / 1000 + processCpuMs(Number(serverPid));
}
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

interface Figure {
  readonly enqueue: number;
  readonly lifecycle: number;
  readonly enqueueCpu: number;
  readonly lifecycleCpu: number;
  /** Write operations sent (multis count each operation), which noise does not move. */
  readonly enqueueOps: number;
  readonly lifecycleOps: number;
}

/** Write operations this client's session sent so far. */
function writeOps(client: object): number {
  return (storeOf(client) as unknown as { zk: { sent: { writes: number } } }).zk.sent.writes;
}

async function measure(variant: Variant, count: number): Promise<Figure> {
  const client = await variant.connect(await freshUrl(), { maintenance: false });
  try {
    const queue = 'bench';
    await client.configure(queue, { events: variant.events });
    const [cpu0, ops0] = [cpuMs(), writeOps(client)];
    const enqueue = await timed(() => inFlight(count, 64, (i) => client.enqueue(queue, { i })));
    const [cpu1, ops1] = [cpuMs(), writeOps(client)];
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
    const figure = {
      enqueue,
      lifecycle: performance.now() - start,
      enqueueCpu: cpu1 - cpu0,
      lifecycleCpu: cpuMs() - cpu1,
      enqueueOps: ops1 - ops0,
      lifecycleOps: writeOps(client) - ops1,
    };
    // The server keeps every node in its heap: what a round wrote goes, or later rounds measure its GC.
    await client.clear(queue);
    return figure;
  } finally {
    await client.close();
  }
}

const KEYS = ['enqueue', 'lifecycle', 'enqueueCpu', 'lifecycleCpu', 'enqueueOps', 'lifecycleOps'] as const;
const samples = (): Record<(typeof KEYS)[number], number[]> => ({
  enqueue: [],
  lifecycle: [],
  enqueueCpu: [],
  lifecycleCpu: [],
  enqueueOps: [],
  lifecycleOps: [],
});

// Warm-up: each variant once, not counted.
for (const variant of variants) await measure(variant, Math.ceil(n / 4));
const times = new Map(variants.map((v) => [v.name, samples()]));
const ratios = new Map(variants.map((v) => [v.name, samples()]));
for (let round = 0; round < rounds; round++) {
  const order = variants.map((_, k) => variants[(k + round) % variants.length] as Variant);
  const figures = new Map<string, Figure>();
  for (const variant of order) figures.set(variant.name, await measure(variant, n));
  const base = figures.get('events off');
  for (const [name, figure] of figures) {
    for (const key of KEYS) {
      times.get(name)?.[key].push(figure[key]);
      if (base !== undefined) ratios.get(name)?.[key].push(figure[key] / base[key]);
    }
  }
  process.stderr.write(`round ${round + 1}/${rounds} done\n`);
}

const rows = variants.map((v) => {
  const t = times.get(v.name) ?? samples();
  const r = ratios.get(v.name) ?? samples();
  const ratio = (key: (typeof KEYS)[number]): string => `×${median(r[key]).toFixed(3)}`;
  const perMessage = (key: 'enqueueCpu' | 'lifecycleCpu'): string => `${((median(t[key]) * 1000) / n).toFixed(0)} µs`;
  return [
    v.name,
    `${whole.format((n * 1000) / median(t.enqueue))} /s (${ratio('enqueue')})`,
    `${perMessage('enqueueCpu')} (${ratio('enqueueCpu')})`,
    (median(t.enqueueOps) / n).toFixed(2),
    `${whole.format((n * 1000) / median(t.lifecycle))} /s (${ratio('lifecycle')})`,
    `${perMessage('lifecycleCpu')} (${ratio('lifecycleCpu')})`,
    (median(t.lifecycleOps) / n).toFixed(2),
  ];
});
process.stdout.write(
  `${n} messages, ${rounds} rounds; medians, and in brackets the median of each round's ratio to events off\n`,
);
process.stdout.write(
  table(
    [
      'variant',
      'enqueue (64 in flight)',
      'enqueue CPU / message',
      'enqueue write ops / message',
      'claim + finish (c=64)',
      'claim + finish CPU / message',
      'claim + finish write ops / message',
    ],
    rows,
    true,
  ),
);

/** Median ms of `reads` calls of `read`. */
async function readCost(reads: number, read: () => Promise<unknown>): Promise<number> {
  const samples: number[] = [];
  for (let i = 0; i < reads; i++) samples.push(await timed(read));
  return median(samples);
}

const kept = Number(values.kept);

/** Read costs on a queue holding `kept` events, written in nodes of `perNode` (1: every event its own multi). */
async function measureReads(perNode: number): Promise<string[][]> {
  const reader = await connect(await freshUrl(), { maintenance: false });
  try {
    const queue = 'reads';
    await reader.configure(queue, { events: true, eventsMaxCount: kept });
    if (perNode === 1) {
      for (let i = 0; i < kept; i++) await reader.enqueue(queue, { i });
    } else {
      await fill(reader, queue, kept, perNode);
    }
    const head = await storeOf(reader).eventsHead(queue);
    const tail = (await reader.readEvents(queue, { limit: 10_000 })).events.at(-101)?.cursor ?? head;
    const oldest = await readCost(50, () => reader.readEvents(queue, { limit: 100 }));
    const newest = await readCost(50, () => reader.readEvents(queue, { after: tail, limit: 100 }));
    const atHead = await readCost(50, () => storeOf(reader).eventsHead(queue));
    const nodes = perNode === 1 ? 'a node per event' : `enqueueBatch of ${whole.format(perNode)}`;
    return [
      [`readEvents: 100 from the oldest (${nodes})`, `${oldest.toFixed(2)} ms`],
      [`readEvents: the newest 100 (${nodes})`, `${newest.toFixed(2)} ms`],
      [`eventsHead (${nodes})`, `${atHead.toFixed(2)} ms`],
    ];
  } finally {
    await reader.close();
  }
}

const readRows = [...(await measureReads(1000)), ...(await measureReads(1))];
process.stdout.write(`\nreads with ${whole.format(kept)} events kept (median of 50)\n`);
process.stdout.write(table(['read', 'time'], readRows, true));
