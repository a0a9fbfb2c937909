/**
 * `node --import tsx bench/serve/run.ts [--quick] [--no-write]`
 *
 * `kvmq serve` against a real etcd 3.4 (Debian's etcd-server, durable: every write fsynced before it is
 * answered), both started here on loopback, under the same clients and load, round after round:
 *
 * 1. puts from the npm etcd3 client with 64 in flight: puts/s, p50/p99 latency, and each server's CPU time
 *    per put, read from /proc for the server process;
 * 2. the same from a lighter load generator: raw HTTP/2 gRPC calls (bench/serve/put-load.ts) from two
 *    processes with 32 in flight each, so the client is less of the limit;
 * 2b. ranges of one key from h2load (bench/serve/h2load.ts), a C load generator: ranges/s and CPU per range;
 * 3. watch fan-out: one key watched by 100 watch streams, and the time from a put to each watcher's event;
 * 4. queue throughput through kvmq serve with plain etcd clients only: producers put
 *    /queue/{q}/producer/{id}, consumers registered under /queue/{q}/consumer/{uuid} watch their prefix
 *    and delete each delivery (the ack); the dispatcher runs inside the server.
 *
 * `--baseline REF` also runs kvmq serve as it was at git commit REF (checked out in a temporary worktree),
 * in the same rounds, so a change to the server is measured side by side with what it replaced.
 *
 * Writes the `serve` section of docs/benchmarks.md (unless --no-write).
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus, loadavg, release, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type * as Grpc from '@grpc/grpc-js';
import type * as ProtoLoader from '@grpc/proto-loader';
import { Etcd3 } from 'etcd3';
import { inFlight, median, quantile } from '../common.js';
import { writeSection } from '../doc.js';
import { h2loadRanges, H2LOAD_PACKAGES } from './h2load.js';
import { cpuMs } from '../process-cpu.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const require = createRequire(import.meta.url);

interface Sizes {
  readonly puts: number;
  readonly h2Puts: number;
  readonly watchPuts: number;
  readonly ranges: number;
  readonly queueMessages: number;
  readonly rounds: number;
}
const FULL: Sizes = { puts: 20_000, h2Puts: 20_000, ranges: 100_000, watchPuts: 400, queueMessages: 5000, rounds: 5 };
const QUICK: Sizes = { puts: 2000, h2Puts: 2000, ranges: 10_000, watchPuts: 30, queueMessages: 300, rounds: 1 };
/** h2load's connections and streams in flight on each for the range rows. */
const RANGE_CLIENTS = 4;
const RANGE_STREAMS = 16;
const IN_FLIGHT = 64;
const WATCHERS = 100;
const CONSUMERS = 4;
/** Deliveries each bench consumer holds at once. */
const CAPACITY = 64;

// ---- servers ----

interface Server {
  readonly name: string;
  readonly endpoint: string;
  readonly pid: number;
  stop(): Promise<void>;
}

interface EtcdModule {
  start(
    dir: string,
    options?: object,
  ): Promise<{ endpoints: string; member: { pid: number | undefined }; stop(): Promise<void> }>;
}

async function startEtcd(dir: string): Promise<Server> {
  const mod = (await import(new URL('../../scripts/servers/etcd.mjs', import.meta.url).href)) as EtcdModule;
  const started = await mod.start(join(dir, 'etcd'), { compactionRetention: '0' });
  return { name: 'etcd 3.4', endpoint: started.endpoints, pid: started.member.pid ?? 0, stop: () => started.stop() };
}

/** A TypeScript program run with tsx that prints {"endpoint": "HOST:PORT"} once it listens. */
async function startListener(name: string, root: string, args: string[]): Promise<Server> {
  const child = spawn(process.execPath, ['--import', 'tsx', ...args], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`${name} exited (${String(code)}) before it listened`)));
  });
  const { endpoint } = JSON.parse(line) as { endpoint: string };
  return {
    name,
    endpoint,
    pid: child.pid ?? 0,
    stop: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

/** kvmq serve from the source tree at `root` (this one, or a baseline's worktree). */
function startKvmq(dir: string, root: string, name: string): Promise<Server> {
  const data = join(dir, name.replace(/\W+/g, '-'));
  return startListener(name, root, [
    join(root, 'src/cli/main.ts'),
    'serve',
    '--data',
    data,
    '--listen',
    '127.0.0.1:0',
    '--json',
  ]);
}

/** A worktree of this repository at `ref`, sharing this tree's node_modules; removed by the returned function. */
function checkoutBaseline(ref: string, dir: string): { root: string; remove: () => void } {
  const root = join(dir, 'baseline');
  const added = spawnSync('git', ['worktree', 'add', '--detach', root, ref], { cwd: ROOT, encoding: 'utf8' });
  if (added.status !== 0) throw new Error(`cannot check out --baseline ${ref}: ${added.stderr.trim()}`);
  symlinkSync(join(ROOT, 'node_modules'), join(root, 'node_modules'));
  return { root, remove: () => spawnSync('git', ['worktree', 'remove', '--force', root], { cwd: ROOT }) };
}

// ---- measurements ----

interface PutFigures {
  readonly perSec: number;
  readonly cpuUsPerPut: number;
  readonly p50: number;
  readonly p99: number;
}

async function clientPuts(server: Server, n: number): Promise<PutFigures> {
  const client = new Etcd3({ hosts: `http://${server.endpoint}` });
  try {
    const value = 'v'.repeat(32);
    await inFlight(Math.min(2000, n), IN_FLIGHT, (i) =>
      client
        .put(`warm/${i % 100}`)
        .value(value)
        .exec(),
    );
    const latencies: number[] = [];
    const cpu = cpuMs(server.pid);
    const start = performance.now();
    const run = randomUUID().slice(0, 8);
    await inFlight(n, IN_FLIGHT, async (i) => {
      const t = performance.now();
      await client.put(`bench/${run}/${i}`).value(value);
      latencies.push(performance.now() - t);
    });
    const ms = performance.now() - start;
    const cpuUsed = cpuMs(server.pid) - cpu;
    latencies.sort((a, b) => a - b);
    return {
      perSec: (n * 1000) / ms,
      cpuUsPerPut: (cpuUsed * 1000) / n,
      p50: quantile(latencies, 0.5),
      p99: quantile(latencies, 0.99),
    };
  } finally {
    client.close();
  }
}

async function h2Puts(server: Server, n: number): Promise<PutFigures> {
  const processes = 2;
  const each = Math.ceil(n / processes);
  const cpu = cpuMs(server.pid);
  const results = await Promise.all(
    Array.from({ length: processes }, () => {
      const child = spawn(
        process.execPath,
        [
          '--import',
          'tsx',
          join(ROOT, 'bench/serve/put-load.ts'),
          server.endpoint,
          String(each),
          String(IN_FLIGHT / processes),
        ],
        { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
      );
      return new Promise<{ n: number; ms: number; p50: number; p99: number }>((resolve, reject) => {
        createInterface({ input: child.stdout }).once('line', (line) => resolve(JSON.parse(line) as never));
        child.once('exit', (code) => {
          if (code !== 0) reject(new Error(`put-load exited with ${String(code)}`));
        });
      });
    }),
  );
  // The children's warm-up puts (200 each) are in the CPU time too.
  const cpuUsed = cpuMs(server.pid) - cpu;
  return {
    perSec: results.reduce((sum, r) => sum + (r.n * 1000) / r.ms, 0),
    cpuUsPerPut: (cpuUsed * 1000) / (n + processes * 200),
    p50: Math.max(...results.map((r) => r.p50)),
    p99: Math.max(...results.map((r) => r.p99)),
  };
}

interface RangeFigures {
  readonly perSec: number;
  readonly cpuUsPerRange: number;
}

async function h2Ranges(server: Server, dir: string, n: number): Promise<RangeFigures> {
  const key = 'bench/range';
  const client = new Etcd3({ hosts: `http://${server.endpoint}` });
  try {
    await client.put(key).value('v'.repeat(32));
  } finally {
    client.close();
  }
  const cpu = cpuMs(server.pid);
  const { perSec } = await h2loadRanges(server.endpoint, dir, key, n, RANGE_CLIENTS, RANGE_STREAMS);
  return { perSec, cpuUsPerRange: ((cpuMs(server.pid) - cpu) * 1000) / n };
}

interface WatchFigures {
  /** Put to one watcher's event. */
  readonly p50: number;
  readonly p99: number;
  /** Put to the last of the 100 watchers' events. */
  readonly allP99: number;
}

async function watchFanout(server: Server, puts: number): Promise<WatchFigures> {
  const grpc = require('@grpc/grpc-js') as typeof Grpc;
  const loader = require('@grpc/proto-loader') as typeof ProtoLoader;
  const protoDir = join(ROOT, 'node_modules/etcd3/proto');
  const definition = loader.loadSync(join(protoDir, 'rpc.proto'), {
    keepCase: true,
    longs: String,
    defaults: true,
    includeDirs: [protoDir],
  });
  type WatchClient = Grpc.Client & {
    Watch(): Grpc.ClientDuplexStream<object, { created: boolean; events: { kv: { value: Buffer } }[] }>;
  };
  const pkg = grpc.loadPackageDefinition(definition) as unknown as {
    etcdserverpb: { Watch: new (address: string, credentials: Grpc.ChannelCredentials) => WatchClient };
  };
  const key = Buffer.from(`fanout/${randomUUID()}`);
  // 100 watch streams over 4 connections.
  const channels = Array.from(
    { length: 4 },
    () => new pkg.etcdserverpb.Watch(server.endpoint, grpc.credentials.createInsecure()),
  );
  const sent = new Map<string, number>();
  const delays: number[] = [];
  const lastSeen = new Map<string, number>();
  const seen = new Map<string, number>();
  let created = 0;
  const streams = Array.from({ length: WATCHERS }, (_, i) => {
    const stream = (channels[i % channels.length] as WatchClient).Watch();
    stream.on('data', (resp: { created: boolean; events: { kv: { value: Buffer } }[] }) => {
      if (resp.created) created++;
      for (const ev of resp.events) {
        const id = ev.kv.value.toString();
        const at = performance.now();
        const start = sent.get(id);
        if (start === undefined) continue;
        delays.push(at - start);
        lastSeen.set(id, Math.max(lastSeen.get(id) ?? 0, at - start));
        seen.set(id, (seen.get(id) ?? 0) + 1);
      }
    });
    stream.on('error', () => undefined);
    stream.write({ create_request: { key } });
    return stream;
  });
  const client = new Etcd3({ hosts: `http://${server.endpoint}` });
  try {
    while (created < WATCHERS) await new Promise((resolve) => setTimeout(resolve, 10));
    for (let i = 0; i < puts; i++) {
      const id = `p${i}`;
      sent.set(id, performance.now());
      await client.put(key).value(id);
      // A steady light rate: 50 puts/s, so each fan-out is measured on its own.
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const deadline = Date.now() + 10_000;
    while ([...sent.keys()].some((id) => (seen.get(id) ?? 0) < WATCHERS) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  } finally {
    client.close();
    for (const stream of streams) stream.cancel();
    for (const channel of channels) channel.close();
  }
  delays.sort((a, b) => a - b);
  const all = [...lastSeen.values()].sort((a, b) => a - b);
  return { p50: quantile(delays, 0.5), p99: quantile(delays, 0.99), allP99: quantile(all, 0.99) };
}

/**
 * Messages per second from the first producer put to the last consumer ack, plain etcd clients only:
 * the producer here, the consumers in a process of their own (bench/serve/queue-consumers.ts).
 */
async function queueThroughput(server: Server, n: number): Promise<number> {
  const queue = `bench-${randomUUID().slice(0, 8)}`;
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      join(ROOT, 'bench/serve/queue-consumers.ts'),
      server.endpoint,
      queue,
      String(n),
      String(CONSUMERS),
      String(CAPACITY),
    ],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const lines = createInterface({ input: child.stdout });
  const next = (): Promise<string> =>
    new Promise((resolve, reject) => {
      lines.once('line', resolve);
      child.once('exit', (code) => reject(new Error(`queue consumers exited (${String(code)})`)));
    });
  const producer = new Etcd3({ hosts: `http://${server.endpoint}` });
  try {
    if ((await next()) !== 'ready') throw new Error('queue consumers did not start');
    const done = next();
    const start = performance.now();
    await inFlight(n, IN_FLIGHT, (i) => producer.put(`/queue/${queue}/producer/m${i}`).value(`payload ${i}`).exec());
    await done;
    return (n * 1000) / (performance.now() - start);
  } finally {
    producer.close();
    child.kill();
  }
}

// ---- report ----

const f0 = (x: number): string => (Number.isFinite(x) ? Math.round(x).toLocaleString('en-US') : '-');
const f1 = (x: number): string => (Number.isFinite(x) ? x.toFixed(1) : '-');

/** One server's figures, a set per round. */
interface ServerFigures {
  readonly client: PutFigures[];
  readonly h2: PutFigures[];
  readonly ranges: RangeFigures[];
  readonly watch: WatchFigures[];
}

/** What kvmq serve should reach, as a multiple of etcd's figure: at least (higher) or at most (lower). */
interface Target {
  readonly want: 'higher' | 'lower';
  readonly factor: number;
}

function meets(target: Target, etcd: number, kvmq: number): boolean {
  return target.want === 'higher' ? kvmq >= etcd * target.factor : kvmq <= etcd * target.factor;
}

function describeTarget(target: Target): string {
  const times = target.factor === 1 ? 'etcd' : `${target.factor} × etcd`;
  return `${target.want === 'higher' ? '≥' : '≤'} ${times}`;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { quick: { type: 'boolean' }, 'no-write': { type: 'boolean' }, baseline: { type: 'string' } },
  });
  const sizes = values.quick === true ? QUICK : FULL;
  const dir = mkdtempSync(join(tmpdir(), 'kvmq-bench-serve-'));
  const load = loadavg()[0]?.toFixed(2) ?? '?';
  const { ensurePackages } = (await import(new URL('../../scripts/servers.mjs', import.meta.url).href)) as {
    ensurePackages: (kind: string, packages: string[], binary: string) => void;
  };
  ensurePackages('the range rows', H2LOAD_PACKAGES, 'h2load');
  const baseline = values.baseline === undefined ? null : checkoutBaseline(values.baseline, dir);
  const baselineName = `kvmq serve at ${values.baseline ?? ''}`;
  const servers = await Promise.all([
    startEtcd(dir),
    startKvmq(dir, ROOT, 'kvmq serve'),
    ...(baseline === null ? [] : [startKvmq(dir, baseline.root, baselineName)]),
  ]);
  const ceiling = await startListener('node:http2 ceiling', ROOT, [join(ROOT, 'bench/serve/h2-ceiling.ts')]);
  const ceilingRanges: number[] = [];
  const cleanUp = async (): Promise<void> => {
    await Promise.allSettled([...servers, ceiling].map((s) => s.stop()));
    baseline?.remove();
    rmSync(dir, { recursive: true, force: true });
  };
  // A failure inside a stream callback must not leave the servers running.
  process.once('uncaughtException', (error) => {
    console.error(error);
    void cleanUp().then(() => process.exit(1));
  });
  const [etcd, kvmq] = servers;
  const figures = new Map<string, ServerFigures>();
  for (const server of servers) figures.set(server.name, { client: [], h2: [], ranges: [], watch: [] });
  const queue: number[] = [];
  try {
    for (let round = 0; round < sizes.rounds; round++) {
      for (const server of round % 2 === 0 ? servers : [...servers].reverse()) {
        const f = figures.get(server.name);
        if (f === undefined) continue;
        process.stderr.write(`bench serve: round ${round + 1}/${sizes.rounds}, ${server.name}\n`);
        f.client.push(await clientPuts(server, sizes.puts));
        f.h2.push(await h2Puts(server, sizes.h2Puts));
        f.ranges.push(await h2Ranges(server, dir, sizes.ranges));
        f.watch.push(await watchFanout(server, sizes.watchPuts));
      }
      queue.push(await queueThroughput(kvmq, sizes.queueMessages));
      const ranges = await h2loadRanges(
        ceiling.endpoint,
        dir,
        'bench/range',
        sizes.ranges,
        RANGE_CLIENTS,
        RANGE_STREAMS,
      );
      ceilingRanges.push(ranges.perSec);
    }
  } finally {
    await cleanUp();
  }
  const of = (name: string, pick: (f: ServerFigures) => number[]): number => {
    const f = figures.get(name);
    return f === undefined ? NaN : median(pick(f));
  };
  const higher = (factor: number): Target => ({ want: 'higher', factor });
  const lower = (factor: number): Target => ({ want: 'lower', factor });
  const measures: [string, (f: ServerFigures) => number[], (x: number) => string, Target | null][] = [
    ['puts/s, etcd3 client, 64 in flight', (f) => f.client.map((x) => x.perSec), f0, higher(1)],
    ['server CPU per put (µs), etcd3 client', (f) => f.client.map((x) => x.cpuUsPerPut), f1, lower(0.8)],
    ['put latency p50 (ms), etcd3 client', (f) => f.client.map((x) => x.p50), f1, null],
    ['put latency p99 (ms), etcd3 client', (f) => f.client.map((x) => x.p99), f1, lower(1)],
    ['puts/s, raw HTTP/2, 2 processes × 32 in flight', (f) => f.h2.map((x) => x.perSec), f0, higher(1)],
    ['server CPU per put (µs), raw HTTP/2', (f) => f.h2.map((x) => x.cpuUsPerPut), f1, lower(0.8)],
    ['put latency p99 (ms), raw HTTP/2', (f) => f.h2.map((x) => x.p99), f1, lower(1)],
    [
      `ranges/s, h2load, ${RANGE_CLIENTS} connections × ${RANGE_STREAMS} in flight`,
      (f) => f.ranges.map((x) => x.perSec),
      f0,
      higher(5),
    ],
    ['server CPU per range (µs), h2load', (f) => f.ranges.map((x) => x.cpuUsPerRange), f1, null],
    [`watch fan-out to ${WATCHERS} watchers, p50 (ms)`, (f) => f.watch.map((x) => x.p50), f1, null],
    [`watch fan-out to ${WATCHERS} watchers, p99 (ms)`, (f) => f.watch.map((x) => x.p99), f1, lower(1)],
    [`watch fan-out, all ${WATCHERS} notified, p99 (ms)`, (f) => f.watch.map((x) => x.allP99), f1, null],
  ];
  const baselineColumn = baseline === null ? [] : [baselineName];
  const rows = measures.map(([measure, pick, fmt, target]) => {
    const e = of(etcd.name, pick);
    const k = of(kvmq.name, pick);
    const cells = [
      measure,
      fmt(e),
      ...baselineColumn.map((name) => fmt(of(name, pick))),
      fmt(k),
      (k / e).toFixed(2),
      target === null ? '' : describeTarget(target),
      target === null ? '' : meets(target, e, k) ? 'PASS' : 'FAIL',
    ];
    return `| ${cells.join(' | ')} |`;
  });
  const ceilingRate = median(ceilingRanges);
  // The queue runs on this tree's server only.
  const queueCells = ['-', ...baselineColumn.map(() => '-')];
  const table = [
    `| measure | etcd 3.4 | ${[...baselineColumn, 'kvmq serve'].join(' | ')} | kvmq/etcd | target | |`,
    `|---|---:|${[...baselineColumn, 'kvmq'].map(() => '---:').join('|')}|---:|---|---|`,
    ...rows,
    `| ranges/s, node:http2 answering every call at once with a fixed response (the transport's ceiling) | ${['-', ...queueCells.slice(1)].join(' | ')} | ${f0(ceilingRate)} | ${(ceilingRate / of(etcd.name, (f) => f.ranges.map((x) => x.perSec))).toFixed(2)} | | |`,
    `| queue: messages/s through kvmq serve, plain etcd clients (${CONSUMERS} consumers of capacity ${CAPACITY}, 64 puts in flight) | ${queueCells.join(' | ')} | ${f0(median(queue))} | | | |`,
  ].join('\n');
  process.stdout.write(`${table}\n`);
  const machine = `${cpus().length} × ${cpus()[0]?.model.trim() ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Linux ${release()}, Node ${process.version}`;
  const loadAtEnd = loadavg()[0]?.toFixed(2) ?? '?';
  const command = `node --import tsx bench/serve/run.ts${values.quick === true ? ' --quick' : ''}${values.baseline === undefined ? '' : ` --baseline ${values.baseline}`}`;
  const body = [
    '## serve: kvmq serve and etcd 3.4 side by side',
    '',
    `\`${command}\` (bench/serve/run.ts): ${machine};`,
    `load average ${load} at the start, ${loadAtEnd} at the end; median of ${sizes.rounds} round(s), the servers in`,
    'alternating order. Both durable: etcd fsyncs its WAL, kvmq serve fdatasyncs its WAL, before answering a',
    "write. CPU per put is the server process's user+system time from /proc (all its threads) over the timed",
    'puts, divided by the puts. On these 2 cores the etcd3 client itself is the limit of the first rows; the',
    'raw HTTP/2 rows use a lighter client (two processes, one pre-encoded request per call), and the range rows',
    "Debian's h2load, a C load generator, with one pre-encoded RangeRequest of a 32-byte value.",
    ...(baseline === null
      ? []
      : ['', `The \`${baselineName}\` column is the server as it was at that commit, run in the same rounds.`]),
    '',
    table,
  ].join('\n');
  if (values['no-write'] !== true) writeSection(join(ROOT, 'docs/benchmarks.md'), 'serve', body);
}

await main();
