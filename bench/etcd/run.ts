/**
 * `node --import tsx bench/etcd/run.ts [--store etcd://HOST:PORT] [--backlog N] [--quick] [--no-write] [--only LIST]`
 *
 * kvmq on etcd, in one command: starts an etcd of its own (scripts/servers/etcd.mjs: loopback, fsync on,
 * auto-compaction) unless one is given (--store, or $KVMQ_TEST_ETCD_URL under
 * `node scripts/servers.mjs run etcd -- ...`), and then:
 *
 * 1. the physical limit, round after round: etcd's raw put rate (one put per request, 64 in flight, through
 *    bench/raw/etcd.ts) and kvmq's full lifecycle at concurrency 64 on the same server. A message takes
 *    three etcd writes (enqueue, delivery, finish; each one Txn, however many keys it touches), so the limit
 *    is raw puts/s ÷ 3. The revisions kvmq really used per message are counted too: batching puts many
 *    messages in one Txn, so it is well under 3;
 * 2. the protocol's latency: a plain producer's put to a plain consumer's watch event of the delivery, at a
 *    light steady rate, with a dispatcher in this process; and kvmq's enqueue to handler at the same rate;
 * 3. the standard bench (`bench/run.ts --store URL --backlog N`), which writes the `etcd` section;
 *
 * and writes the `etcd-protocol` section of docs/benchmarks.md, with the etcd db size after the backlog.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, release, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { etcdctl, start } from '../../scripts/servers/etcd.mjs';
import { connect } from '../../src/index.js';
import { openEtcdStore } from '../../src/etcd/store.js';
import { quantile, signal, sleepUntil, type BenchSizes } from '../common.js';
import { writeSection } from '../doc.js';
import { measureLifecycle } from '../lifecycle.js';
import { measureRaw, rawEtcd, RAW_IN_FLIGHT } from '../raw/etcd.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const LIFECYCLE_CONCURRENCY = 64;
// enqueue, delivery, finish: each one Txn per message (a batched Txn counting once).
const WRITES_PER_MESSAGE = 3;
const LIMIT_FRACTION_TARGET = 0.8;

interface Sizes {
  readonly limitN: number;
  readonly latencyN: number;
  readonly latencyPerSec: number;
  readonly runs: number;
}
const FULL: Sizes = { limitN: 20_000, latencyN: 1000, latencyPerSec: 100, runs: 3 };
const QUICK: Sizes = { limitN: 3000, latencyN: 200, latencyPerSec: 100, runs: 1 };

const whole = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });
const median = (values: readonly number[]): number =>
  quantile(
    [...values].sort((a, b) => a - b),
    0.5,
  );

// --- the physical limit ----------------------------------------------------

interface Limit {
  raw: number[];
  kvmq: number[];
  revisions: number;
  messages: number;
}

async function limitRound(url: string, sizes: Sizes, into: Limit): Promise<void> {
  const bench: BenchSizes = {
    enqueueSingle: sizes.limitN,
    // The raw module also times batched Txns; the limit needs only its single puts.
    enqueueBatched: 1000,
    batchSize: 1000,
    lifecycle1: sizes.limitN,
    lifecycle64: sizes.limitN,
    latencyMessages: 0,
    latencyPerSec: 0,
    backlogSmall: 0,
    backlogLarge: 0,
    backlogProbe: 0,
    warmFraction: 0.1,
    runs: 1,
  };
  into.raw.push((await measureRaw(url, bench)).single.perSec);
  const raw = await rawEtcd(url);
  const client = await connect(url);
  const queues: string[] = [];
  try {
    const before = await raw.revision();
    const figure = await measureLifecycle(
      {
        client,
        sizes: bench,
        queue: (label) => {
          queues.push(`limit-${Date.now().toString(36)}-${label}`);
          return queues.at(-1) ?? label;
        },
      },
      LIFECYCLE_CONCURRENCY,
      sizes.limitN,
    );
    into.revisions += (await raw.revision()) - before;
    into.messages += sizes.limitN + Math.round(sizes.limitN * bench.warmFraction);
    into.kvmq.push(figure.perSec);
    await client.clear(...queues);
  } finally {
    await client.close();
    await raw.close();
  }
}

// --- latency ---------------------------------------------------------------

interface Latency {
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
}

function latencyOf(samples: number[]): Latency {
  const sorted = samples.sort((a, b) => a - b);
  return { p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99), max: quantile(sorted, 1) };
}

/** A plain producer's put to a plain consumer's watch event, through a dispatcher in this process. */
async function plainLatency(url: string, sizes: Sizes): Promise<Latency> {
  const queue = `latency-plain-${Date.now().toString(36)}`;
  const store = await openEtcdStore(url);
  const release = store.dispatch(queue);
  const keys = store.keys(queue);
  const lib = await import('etcd3');
  const hosts = url.replace(/^etcd:\/\//, '').replace(/[/?].*$/, '');
  const client = new lib.Etcd3({ hosts: hosts.split(',').map((h) => `http://${h}`) });
  const sentAt = new Map<string, number>();
  const samples: number[] = [];
  const all = signal();
  try {
    while (!store.host.dispatching(queue)) await new Promise((resolve) => setTimeout(resolve, 20));
    const registration = `${keys.consumers}plain-consumer`;
    const watcher = await client
      .watch()
      .prefix(Buffer.from(`${registration}/`))
      .create();
    watcher.on('put', (kv) => {
      const key = kv.key.toString();
      const id = key.slice(key.lastIndexOf('/') + 1);
      const at = sentAt.get(id);
      if (at === undefined) return;
      samples.push(performance.now() - at);
      void client.delete().key(kv.key).exec();
      if (samples.length === sizes.latencyN) all.fire();
    });
    const lease = client.lease(10);
    await lease.put(Buffer.from(registration)).value(JSON.stringify({ host: 'bench', capacity: 16 }));
    const gapMs = 1000 / sizes.latencyPerSec;
    const begin = performance.now();
    for (let i = 0; i < sizes.latencyN; i++) {
      await sleepUntil(begin + i * gapMs);
      const id = `m${i}`;
      sentAt.set(id, performance.now());
      await client.put(Buffer.from(keys.producer(id))).value(`{"i":${i}}`);
    }
    await all.promise;
    await watcher.cancel();
    await lease.revoke();
  } finally {
    release();
    await client.delete().prefix(keys.prefix).exec();
    client.close();
    await store.close();
  }
  return latencyOf(samples);
}

/** kvmq's enqueue to a kvmq handler (one worker, concurrency 1) at the same rate. */
async function kvmqLatency(url: string, sizes: Sizes): Promise<Latency> {
  const client = await connect(url);
  const queue = `latency-kvmq-${Date.now().toString(36)}`;
  const samples: number[] = [];
  const all = signal();
  const idle = signal();
  try {
    const worker = client.worker(
      queue,
      (job) => {
        samples.push(performance.now() - (job.payload as { t: number }).t);
        if (samples.length === sizes.latencyN) all.fire();
      },
      { monitor: (info) => info.claimed.length === 0 && idle.fire() },
    );
    await idle.promise;
    const gapMs = 1000 / sizes.latencyPerSec;
    const begin = performance.now();
    for (let i = 0; i < sizes.latencyN; i++) {
      await sleepUntil(begin + i * gapMs);
      await client.enqueue(queue, { t: performance.now() });
    }
    await all.promise;
    await worker.stop();
    await client.clear(queue);
  } finally {
    await client.close();
  }
  return latencyOf(samples);
}

// --- the standard bench and the db size ------------------------------------

function standardBench(url: string, backlog: number, quick: boolean, write: boolean, only?: string): Promise<number> {
  const args = ['--import', 'tsx', 'bench/run.ts', '--store', url, '--backlog', String(backlog)];
  if (quick) args.push('--quick');
  if (!write) args.push('--no-write');
  if (only !== undefined) args.push('--only', only);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: ROOT, stdio: 'inherit' });
    child.once('error', reject);
    child.once('exit', (code) => resolve(code ?? 1));
  });
}

async function dbSize(endpoints: string): Promise<{ size: number; inUse: number } | null> {
  const { code, stdout } = await etcdctl(endpoints, ['endpoint', 'status', '-w', 'json']);
  if (code !== 0) return null;
  const [status] = JSON.parse(stdout) as [{ Status?: { dbSize?: number; dbSizeInUse?: number } }?];
  const s = status?.Status;
  return s?.dbSize === undefined ? null : { size: s.dbSize, inUse: s.dbSizeInUse ?? s.dbSize };
}

// --- report ----------------------------------------------------------------

function table(header: readonly string[], body: readonly string[][], markdown: boolean): string {
  if (markdown) {
    const line = (cells: readonly string[]): string => `| ${cells.join(' | ')} |`;
    return [line(header), line(header.map(() => '---')), ...body.map(line)].join('\n');
  }
  const rows = [header, ...body];
  const widths = header.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows
    .map((r) =>
      r
        .map((c, i) => c.padEnd(widths[i] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

async function step<T>(label: string, task: () => Promise<T>): Promise<T> {
  process.stderr.write(`bench: ${label} … `);
  const begin = performance.now();
  try {
    return await task();
  } finally {
    process.stderr.write(`${((performance.now() - begin) / 1000).toFixed(1)} s\n`);
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      store: { type: 'string' },
      backlog: { type: 'string', default: '1000000' },
      quick: { type: 'boolean', default: false },
      'no-write': { type: 'boolean', default: false },
      only: { type: 'string' },
    },
  });
  const machine =
    `${cpus().length} cores (${cpus()[0]?.model.trim() ?? '?'}), ${(totalmem() / 1024 ** 3).toFixed(1)} GB RAM, ` +
    `${process.platform} ${release()}, Node ${process.version}, load average ${loadavg()[0]?.toFixed(2) ?? '?'} at start`;
  const sizes = values.quick ? QUICK : FULL;
  const backlog = Number((values.quick ? '20000' : values.backlog).replaceAll('_', ''));
  const temp = mkdtempSync(join(tmpdir(), 'kvmq-etcd-bench-'));
  const given = values.store ?? process.env.KVMQ_TEST_ETCD_URL;
  const own = given === undefined ? await step('starting etcd', () => start(join(temp, 'etcd'))) : null;
  try {
    const base = /^etcds?:\/\/[^/?]*/.exec(own?.url ?? given ?? '')?.[0] ?? '';
    const endpoints = base.replace(/^etcd:\/\//, '').replace(/^[^@]*@/, '');
    const url = `${base}/bench-${Date.now().toString(36)}`;
    const limit: Limit = { raw: [], kvmq: [], revisions: 0, messages: 0 };
    for (let round = 0; round < sizes.runs; round++) {
      await step(`raw puts and kvmq lifecycle, round ${round + 1}`, () => limitRound(url, sizes, limit));
    }
    const plain = await step('latency, plain put → plain consumer', () => plainLatency(url, sizes));
    const kvmq = await step('latency, kvmq enqueue → handler', () => kvmqLatency(url, sizes));
    const write = !values['no-write'] && values.only === undefined;
    const code = await step(`standard bench, backlog ${backlog}`, () =>
      standardBench(url, backlog, values.quick, write, values.only),
    );
    const db = await dbSize(endpoints);

    const raw = median(limit.raw);
    const rate = median(limit.kvmq);
    const physical = raw / WRITES_PER_MESSAGE;
    const fraction = rate / physical;
    const spread = (v: number[]): string => v.map((x) => whole.format(x)).join(', ');
    const ms = (n: number): string => `${n.toFixed(n < 10 ? 2 : 1)} ms`;
    const header = ['measurement', 'figure', 'detail', 'target', 'result'];
    const body: string[][] = [
      [
        `raw puts, 1 per request, ${RAW_IN_FLIGHT} in flight`,
        `${whole.format(raw)} puts/s`,
        `runs: ${spread(limit.raw)}`,
        '',
        '',
      ],
      [
        `kvmq full lifecycle, concurrency ${LIFECYCLE_CONCURRENCY}`,
        `${whole.format(rate)} msgs/s`,
        `runs: ${spread(limit.kvmq)}`,
        '',
        '',
      ],
      [
        'etcd writes per message',
        String(WRITES_PER_MESSAGE),
        'enqueue, delivery, finish: one Txn each, whatever it touches',
        '',
        '',
      ],
      [
        'etcd revisions kvmq used per message',
        (limit.revisions / limit.messages).toFixed(3),
        `${limit.revisions} revisions over ${limit.messages} msgs: batching shares a Txn among messages`,
        '',
        '',
      ],
      ['physical limit (raw puts/s ÷ writes per message)', `${whole.format(physical)} msgs/s`, '', '', ''],
      [
        'kvmq as a fraction of the physical limit',
        fraction.toFixed(2),
        '',
        `≥ ${LIMIT_FRACTION_TARGET}`,
        fraction >= LIMIT_FRACTION_TARGET ? 'PASS' : 'FAIL',
      ],
      [
        'latency p50, plain put → consumer watch event',
        ms(plain.p50),
        `${sizes.latencyN} msgs at ${sizes.latencyPerSec}/s, etcdctl-style consumer`,
        '',
        '',
      ],
      ['latency p99, plain put → consumer watch event', ms(plain.p99), `max ${ms(plain.max)}`, '', ''],
      [
        'latency p50, kvmq enqueue → handler',
        ms(kvmq.p50),
        `${sizes.latencyN} msgs at ${sizes.latencyPerSec}/s, concurrency 1`,
        '',
        '',
      ],
      ['latency p99, kvmq enqueue → handler', ms(kvmq.p99), `max ${ms(kvmq.max)}`, '', ''],
    ];
    if (db !== null) {
      const mb = (n: number): string => `${(n / 1024 ** 2).toFixed(0)} MB`;
      body.push([
        `etcd db after the ${whole.format(backlog)} backlog`,
        mb(db.size),
        `in use ${mb(db.inUse)}; quota 2048 MB; auto-compaction keeps history bounded`,
        '',
        '',
      ]);
    }
    const setup =
      `etcd 3.4 (Debian) at ${endpoints}${own === null ? '' : ' (started by the bench)'}, fsync on, ` +
      `auto-compaction 1m; ${sizes.runs} round(s), median; ${sizes.limitN} raw puts and ${sizes.limitN} lifecycle msgs per round`;
    const verdict = fraction >= LIMIT_FRACTION_TARGET ? 'all targets PASS' : 'FAIL: fraction of the physical limit';
    console.log(`\nkvmq on etcd: the physical limit and the protocol's latency${values.quick ? ', quick' : ''}`);
    console.log(`${machine}\n${setup}\n`);
    console.log(table(header, body, false));
    console.log(`\n${verdict}`);
    if (code !== 0) throw new Error(`bench/run.ts exited ${code}`);
    if (values['no-write']) return;
    const command = ['node --import tsx bench/etcd/run.ts', ...process.argv.slice(2)].join(' ');
    const when = new Date().toISOString().replace('T', ' ').slice(0, 16);
    const path = fileURLToPath(new URL('../../docs/benchmarks.md', import.meta.url));
    writeSection(
      path,
      'etcd-protocol',
      `## etcd: the physical limit and the protocol's latency

- Date: ${when} UTC
- Command: \`${command}\`
- Machine: ${machine}.
- Setup: ${setup}.
- The limit: a message takes three etcd writes (kvmq's enqueue, the dispatcher's delivery, the consumer's
  finish), each one Txn whatever keys it touches, so etcd's own put rate ÷ 3 bounds kvmq. kvmq batches many
  messages into each Txn, which is why it can pass the bound; the revisions it really used per message show
  how much.${values.quick ? '\n- **Quick smoke run**: sizes too small for these figures to mean much.' : ''}

${table(header, body, true)}

Targets: ${verdict}.
`,
    );
    console.log('wrote the etcd-protocol section of docs/benchmarks.md');
  } finally {
    if (own !== null) await own.stop();
    rmSync(temp, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
