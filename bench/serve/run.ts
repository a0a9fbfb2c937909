/**
 * `node --import tsx bench/serve/run.ts [--quick] [--no-write]`
 *
 * `kvmq serve` against a real etcd 3.4 (Debian's etcd-server, durable: every write fsynced before it is
 * answered), both started here on loopback, under the same clients and load, round after round:
 *
 * 1. puts from the npm etcd3 client with 64 in flight: puts/s, p50/p99 latency, and each server's CPU time
 *    per put, read from /proc for the server process;
 * 2. the same from a lighter load generator: raw HTTP/2 gRPC calls (bench/serve/h2-load.ts) from two
 *    processes with 32 in flight each, so the client is less of the limit;
 * 3. watch fan-out: one key watched by 100 watch streams, and the time from a put to each watcher's event;
 * 4. queue throughput through kvmq serve with plain etcd clients only: producers put
 *    /queue/{q}/producer/{id}, consumers registered under /queue/{q}/consumer/{uuid} watch their prefix
 *    and delete each delivery (the ack); the dispatcher runs inside the server.
 *
 * Writes the `serve` section of docs/benchmarks.md (unless --no-write).
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
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

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const require = createRequire(import.meta.url);

interface Sizes {
  readonly puts: number;
  readonly h2Puts: number;
  readonly watchPuts: number;
  readonly queueMessages: number;
  readonly rounds: number;
}
const FULL: Sizes = { puts: 20_000, h2Puts: 20_000, watchPuts: 400, queueMessages: 5000, rounds: 5 };
const QUICK: Sizes = { puts: 2000, h2Puts: 2000, watchPuts: 30, queueMessages: 300, rounds: 1 };
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

const CLOCK_TICK_MS = 1000 / Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim() || 100);

/** User plus system CPU time of a process so far, in ms. */
function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * CLOCK_TICK_MS;
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

async function startKvmq(dir: string): Promise<Server> {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      join(ROOT, 'src/cli/main.ts'),
      'serve',
      '--data',
      join(dir, 'kvmq'),
      '--listen',
      '127.0.0.1:0',
      '--json',
    ],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`kvmq serve exited (${String(code)}) before it listened`)));
  });
  const { endpoint } = JSON.parse(line) as { endpoint: string };
  return {
    name: 'kvmq serve',
    endpoint,
    pid: child.pid ?? 0,
    stop: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
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
          join(ROOT, 'bench/serve/h2-load.ts'),
          server.endpoint,
          String(each),
          String(IN_FLIGHT / processes),
        ],
        { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
      );
      return new Promise<{ n: number; ms: number; p50: number; p99: number }>((resolve, reject) => {
        createInterface({ input: child.stdout }).once('line', (line) => resolve(JSON.parse(line) as never));
        child.once('exit', (code) => {
          if (code !== 0) reject(new Error(`h2-load exited with ${String(code)}`));
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
  readonly watch: WatchFigures[];
}

interface Row {
  readonly measure: string;
  readonly etcd: string;
  readonly kvmq: string;
  readonly ratio: string;
  readonly target: string;
  readonly result: string;
}

function compare(
  measure: string,
  etcd: number,
  kvmq: number,
  fmt: (x: number) => string,
  target: 'lower' | 'higher' | '',
): Row {
  const ok =
    target === '' ? '' : target === 'higher' ? (kvmq >= etcd ? 'PASS' : 'FAIL') : kvmq <= etcd ? 'PASS' : 'FAIL';
  return {
    measure,
    etcd: fmt(etcd),
    kvmq: fmt(kvmq),
    ratio: (kvmq / etcd).toFixed(2),
    target: target === '' ? '' : target === 'higher' ? '≥ etcd' : '≤ etcd',
    result: ok,
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { quick: { type: 'boolean' }, 'no-write': { type: 'boolean' } } });
  const sizes = values.quick === true ? QUICK : FULL;
  const dir = mkdtempSync(join(tmpdir(), 'kvmq-bench-serve-'));
  const load = loadavg()[0]?.toFixed(2) ?? '?';
  const servers = await Promise.all([startEtcd(dir), startKvmq(dir)]);
  // A failure inside a stream callback must not leave the servers running.
  process.once('uncaughtException', (error) => {
    console.error(error);
    void Promise.allSettled(servers.map((s) => s.stop())).then(() => {
      rmSync(dir, { recursive: true, force: true });
      process.exit(1);
    });
  });
  const [etcd, kvmq] = servers;
  const figures = new Map<string, ServerFigures>();
  for (const server of servers) figures.set(server.name, { client: [], h2: [], watch: [] });
  const queue: number[] = [];
  try {
    for (let round = 0; round < sizes.rounds; round++) {
      for (const server of round % 2 === 0 ? servers : [...servers].reverse()) {
        const f = figures.get(server.name);
        if (f === undefined) continue;
        process.stderr.write(`bench serve: round ${round + 1}/${sizes.rounds}, ${server.name}\n`);
        f.client.push(await clientPuts(server, sizes.puts));
        f.h2.push(await h2Puts(server, sizes.h2Puts));
        f.watch.push(await watchFanout(server, sizes.watchPuts));
      }
      queue.push(await queueThroughput(kvmq, sizes.queueMessages));
    }
  } finally {
    await Promise.allSettled(servers.map((s) => s.stop()));
    rmSync(dir, { recursive: true, force: true });
  }
  const of = (name: string, pick: (f: ServerFigures) => number[]): number => {
    const f = figures.get(name);
    return f === undefined ? NaN : median(pick(f));
  };
  const measures: [string, (f: ServerFigures) => number[], (x: number) => string, 'lower' | 'higher' | ''][] = [
    ['puts/s, etcd3 client, 64 in flight', (f) => f.client.map((x) => x.perSec), f0, 'higher'],
    ['server CPU per put (µs), etcd3 client', (f) => f.client.map((x) => x.cpuUsPerPut), f1, 'lower'],
    ['put latency p50 (ms), etcd3 client', (f) => f.client.map((x) => x.p50), f1, ''],
    ['put latency p99 (ms), etcd3 client', (f) => f.client.map((x) => x.p99), f1, 'lower'],
    ['puts/s, raw HTTP/2, 2 processes × 32 in flight', (f) => f.h2.map((x) => x.perSec), f0, 'higher'],
    ['server CPU per put (µs), raw HTTP/2', (f) => f.h2.map((x) => x.cpuUsPerPut), f1, 'lower'],
    ['put latency p99 (ms), raw HTTP/2', (f) => f.h2.map((x) => x.p99), f1, 'lower'],
    [`watch fan-out to ${WATCHERS} watchers, p50 (ms)`, (f) => f.watch.map((x) => x.p50), f1, ''],
    [`watch fan-out to ${WATCHERS} watchers, p99 (ms)`, (f) => f.watch.map((x) => x.p99), f1, 'lower'],
    [`watch fan-out, all ${WATCHERS} notified, p99 (ms)`, (f) => f.watch.map((x) => x.allP99), f1, ''],
  ];
  const rows: Row[] = measures.map(([measure, pick, fmt, target]) =>
    compare(measure, of(etcd.name, pick), of(kvmq.name, pick), fmt, target),
  );
  const queueRate = median(queue);
  const table = [
    '| measure | etcd 3.4 | kvmq serve | kvmq/etcd | target | |',
    '|---|---:|---:|---:|---|---|',
    ...rows.map((r) => `| ${r.measure} | ${r.etcd} | ${r.kvmq} | ${r.ratio} | ${r.target} | ${r.result} |`),
    `| queue: messages/s through kvmq serve, plain etcd clients (${CONSUMERS} consumers of capacity ${CAPACITY}, 64 puts in flight) | - | ${f0(queueRate)} | | | |`,
  ].join('\n');
  process.stdout.write(`${table}\n`);
  const machine = `${cpus().length} × ${cpus()[0]?.model.trim() ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Linux ${release()}, Node ${process.version}`;
  const loadAtEnd = loadavg()[0]?.toFixed(2) ?? '?';
  const body = [
    '## serve: kvmq serve and etcd 3.4 side by side',
    '',
    `\`node --import tsx bench/serve/run.ts${values.quick === true ? ' --quick' : ''}\` (bench/serve/run.ts): ${machine};`,
    `load average ${load} at the start, ${loadAtEnd} at the end; median of ${sizes.rounds} round(s), the two servers in`,
    'alternating order. Both durable: etcd fsyncs its WAL, kvmq serve fdatasyncs its WAL, before answering a',
    "write. CPU per put is the server process's user+system time from /proc (all its threads) over the timed",
    'puts, divided by the puts. On these 2 cores the etcd3 client itself is the limit of the first rows; the',
    'raw HTTP/2 rows use a lighter client (two processes, one pre-encoded request per call).',
    '',
    table,
  ].join('\n');
  if (values['no-write'] !== true) writeSection(join(ROOT, 'docs/benchmarks.md'), 'serve', body);
}

await main();
