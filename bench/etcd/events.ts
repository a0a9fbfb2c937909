/**
 * `node --import tsx bench/etcd/events.ts [--store etcd://HOST:PORT] [--rounds R] [--n N] [--width W] [--base DIR]
 *   [--base-label TEXT] [--no-write]`
 *
 * What queue events cost on etcd: enqueue (W calls in flight, 64 unless given) and claim+finish (a worker of
 * concurrency W draining the queue) with `events: false` and `events: true`, side by side in one run. Each
 * measure runs in a process of its own, the modes alternating (their order swapped every round), on one
 * etcd; the median round counts. `--base DIR` adds a third column: events off on another checkout of kvmq
 * (e.g. the commit before events, `git archive` of it with this file copied in), in the same alternation.
 *
 * Writes the `etcd-events` section of docs/benchmarks.md.
 */
import { spawn } from 'node:child_process';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { connect } from '../../src/index.js';
import { EtcdStore } from '../../src/stores/etcd/store.js';
import { inFlight, median, table, whole } from '../common.js';
import { writeSection } from '../doc.js';
import { storeOf } from '../../src/client/client-store.js';

// Enqueue calls in flight, and the worker's concurrency, unless given.
const WIDTH = 64;
// Targets of the issue: events on cost at most 15 % more; events off within 5 % of before.
const ON_TARGET = 1.15;
const OFF_TARGET = 1.05;

interface One {
  readonly enqueuePerSec: number;
  readonly drainPerSec: number;
  /** etcd revisions (Txns) per message: the enqueues', and the deliveries' and finishes' (and polls'). */
  readonly enqueueTxns: number;
  readonly drainTxns: number;
  /** This process's CPU time (user + system, µs) per message: while enqueueing, and while draining. */
  readonly enqueueCpuUs?: number;
  readonly drainCpuUs?: number;
}

/** One measure in this process: `n` enqueues, then a worker drains them; both as messages per second. */
async function measureOne(url: string, events: boolean, n: number, width: number): Promise<One> {
  const client = await connect(url, { maintenance: false });
  const queue = `events-${events ? 'on' : 'off'}-${Date.now().toString(36)}`;
  try {
    await client.configure(queue, { events });
    await client.enqueue(queue, 'warm-up');
    const store = storeOf(client);
    if (!(store instanceof EtcdStore)) throw new Error(`${url} is not an etcd store`);
    const { kv } = store;
    const revision = async (): Promise<number> => (await kv.range({ key: '/', limit: 1, keysOnly: true })).revision;
    const r0 = await revision();
    const cpu0 = process.cpuUsage();
    const begin = performance.now();
    await inFlight(n, width, (i) => client.enqueue(queue, { i }));
    const enqueueMs = performance.now() - begin;
    const cpu1 = process.cpuUsage();
    const r1 = await revision();
    let handled = 0;
    let first = 0;
    let last = 0;
    let done: () => void = () => undefined;
    const all = new Promise<void>((resolve) => (done = resolve));
    const worker = client.worker(
      queue,
      () => {
        const now = performance.now();
        if (handled === 0) first = now;
        handled += 1;
        last = now;
        if (handled === n + 1) done();
      },
      { concurrency: width },
    );
    await all;
    const cpu2 = process.cpuUsage();
    const r2 = await revision();
    await worker.stop();
    await client.clear(queue);
    return {
      enqueuePerSec: (n * 1000) / enqueueMs,
      drainPerSec: (n * 1000) / (last - first),
      enqueueTxns: (r1 - r0) / n,
      drainTxns: (r2 - r1) / n,
      enqueueCpuUs: (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / n,
      drainCpuUs: (cpu2.user + cpu2.system - cpu1.user - cpu1.system) / n,
    };
  } finally {
    await client.close();
  }
}

interface Column {
  readonly label: string;
  readonly script: string;
  readonly events: boolean;
  readonly runs: One[];
}

function runChild(column: Column, url: string, n: number, width: number): Promise<One> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        column.script,
        '--one',
        column.events ? 'on' : 'off',
        '--store',
        url,
        '--n',
        String(n),
        '--width',
        String(width),
      ],
      { cwd: fileURLToPath(new URL('../../', `file://${column.script}`)), stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
    child.on('error', reject);
    child.on('exit', (code) => {
      const line = out.trim().split('\n').at(-1) ?? '';
      if (code !== 0) reject(new Error(`${column.label}: exited ${code}`));
      else resolve(JSON.parse(line) as One);
    });
  });
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      store: { type: 'string' },
      rounds: { type: 'string', default: '5' },
      n: { type: 'string', default: '3000' },
      width: { type: 'string', default: String(WIDTH) },
      base: { type: 'string', multiple: true },
      'base-label': { type: 'string', multiple: true },
      one: { type: 'string' },
      'no-write': { type: 'boolean', default: false },
    },
  });
  const url = values.store ?? process.env.KVMQ_TEST_ETCD_URL;
  if (url === undefined || url === '') throw new Error('give --store etcd://HOST:PORT (or run under servers.mjs)');
  const n = Number(values.n);
  const width = Number(values.width);
  if (values.one !== undefined) {
    console.log(JSON.stringify(await measureOne(url, values.one === 'on', n, width)));
    return;
  }
  const self = fileURLToPath(import.meta.url);
  const columns: Column[] = [
    { label: 'events off', script: self, events: false, runs: [] },
    { label: 'events on', script: self, events: true, runs: [] },
  ];
  const bases = (values.base ?? []).map((dir, i): Column => {
    const column = {
      label: values['base-label']?.[i] ?? (i === 0 ? 'before events' : dir),
      script: `${dir}/bench/etcd/events.ts`,
      events: false,
      runs: [],
    };
    columns.push(column);
    return column;
  });
  const rounds = Number(values.rounds);
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? columns : [...columns].reverse();
    for (const column of order) {
      const one = await runChild(column, url, n, width);
      column.runs.push(one);
      console.log(
        `round ${round + 1} ${column.label}: enqueue ${whole.format(one.enqueuePerSec)}/s, ` +
          `claim+finish ${whole.format(one.drainPerSec)}/s; client CPU µs per msg ` +
          `${one.enqueueCpuUs?.toFixed(1) ?? '?'} and ${one.drainCpuUs?.toFixed(1) ?? '?'}`,
      );
    }
  }
  const med = (c: Column, pick: (o: One) => number): number => median(c.runs.map(pick));
  const [off, on] = columns;
  if (off === undefined || on === undefined) throw new Error('no columns');
  const rows = (['enqueue', 'claim+finish'] as const).map((what) => {
    const pick = (o: One): number => (what === 'enqueue' ? o.enqueuePerSec : o.drainPerSec);
    const offRate = med(off, pick);
    const onRate = med(on, pick);
    const costOn = offRate / onRate;
    const row = [
      `${what}, msgs/s`,
      whole.format(offRate),
      whole.format(onRate),
      `${costOn.toFixed(2)} × (≤ ${ON_TARGET}: ${costOn <= ON_TARGET ? 'PASS' : 'FAIL'})`,
    ];
    for (const base of bases) {
      const baseRate = med(base, pick);
      const costOff = baseRate / offRate;
      row.push(
        whole.format(baseRate),
        `${costOff.toFixed(2)} × (≤ ${OFF_TARGET}: ${costOff <= OFF_TARGET ? 'PASS' : 'FAIL'})`,
      );
    }
    return row;
  });
  const txns = (['enqueue', 'claim+finish'] as const).map((what) => {
    const pick = (o: One): number => (what === 'enqueue' ? o.enqueueTxns : o.drainTxns);
    const row = [`${what}, etcd Txns per msg`, med(off, pick).toFixed(3), med(on, pick).toFixed(3), ''];
    for (const base of bases) row.push(med(base, pick).toFixed(3), '');
    return row;
  });
  // A base checkout older than this column prints none: its cell stays empty.
  const cpu = (['enqueue', 'claim+finish'] as const).map((what) => {
    const pick = (o: One): number => (what === 'enqueue' ? o.enqueueCpuUs : o.drainCpuUs) ?? NaN;
    const cell = (c: Column): string => (Number.isNaN(med(c, pick)) ? '' : med(c, pick).toFixed(1));
    const row = [`${what}, client CPU µs per msg`, cell(off), cell(on), ''];
    for (const base of bases) {
      const ratio = med(base, pick) / med(off, pick);
      row.push(cell(base), Number.isNaN(ratio) ? '' : `${(1 / ratio).toFixed(2)} × its CPU`);
    }
    return row;
  });
  rows.push(...txns, ...cpu);
  const spread = columns
    .map((c) => {
      const range = (pick: (o: One) => number): string => {
        const rates = c.runs.map(pick);
        return `${whole.format(Math.min(...rates))}–${whole.format(Math.max(...rates))}`;
      };
      return `${c.label}: enqueue ${range((o) => o.enqueuePerSec)}, claim+finish ${range((o) => o.drainPerSec)}`;
    })
    .join('; ');
  const header = ['measure', 'events off', 'events on', 'cost of events on'];
  for (const base of bases) header.push(base.label, `cost of events off vs ${base.label}`);
  const machine =
    `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${whole.format(totalmem() / 1024 ** 3)} GiB, ` +
    `Linux ${release()}, load ${loadavg()[0]?.toFixed(1) ?? '?'} at the end`;
  console.log(`\n${machine}\n`);
  console.log(table(header, rows, false));
  if (values['no-write']) return;
  const command = ['node --import tsx bench/etcd/events.ts', ...process.argv.slice(2)].join(' ');
  const when = new Date().toISOString().replace('T', ' ').slice(0, 16);
  writeSection(
    fileURLToPath(new URL('../../docs/benchmarks.md', import.meta.url)),
    'etcd-events',
    `## etcd: the cost of queue events

- Date: ${when} UTC
- Command: \`${command}\`
- Machine: ${machine}.
- Setup: etcd 3.4 (Debian), fsync on; ${rounds} rounds, median; each round ${whole.format(n)} enqueues (${width}
  in flight, one message per call) then a worker of concurrency ${width} claiming and finishing them,
  for each column in a process of its own, the columns alternating (order swapped every round).
- Events on write one more key per Txn (the events of all the Txn's changes: \`enqueued\` with the enqueues,
  \`started\` with the dispatcher's deliveries, \`completed\` with the finishes). Every Txn that changes the
  queue's counts (enqueues, finishes) also puts its writer's count slot (docs/etcd.md, _Counts_), events on or
  off. A burst that fills etcd's 128 ops per Txn by itself (64 enqueues of two ops each; 32 finishes of four)
  has no room for those keys: what does not fit waits for the next burst's Txn (group commit, docs/etcd.md)
  rather than taking a Txn of its own. The Txns per message rows show the Txns, here where 64 calls in flight
  and a worker of concurrency 64 make exactly such bursts.${
    bases.length === 0
      ? ''
      : `\n- ${bases.map((b) => `"${b.label}"`).join(', ')}: the same run on the \`--base\` checkouts (events off), ` +
        "in the same alternation. Client CPU: this process's user + system time (`process.cpuUsage`) per message."
  }
- Slowest–fastest round, msgs/s (the spread says how far the machine's load moved the figures): ${spread}.

${table(header, rows, true)}
`,
  );
  console.log('wrote the etcd-events section of docs/benchmarks.md');
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
