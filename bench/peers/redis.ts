/**
 * `node --import tsx bench/peers/redis.ts --store redis://HOST:PORT [--quick] [--no-write]
 *   [--only enqueue,process,latency] [--peers kvmq,BullMQ] [--rounds N] [--cold] [--allow-busy]`
 *
 * kvmq on Redis side by side with BullMQ and bee-queue, in one run, on one
 * Redis server (so the same durability: its AOF settings), with no-op
 * handlers. Each library is measured in turn, round after round, every other
 * round in reverse order, so drift on a noisy machine hits all three alike;
 * kvmq's ratios to BullMQ are taken per round, and their median reported.
 * Warm (the default): one process, each library warmed up first. Cold
 * (--cold): each measurement in a fresh process, with no warm-up. A machine
 * whose load average is over 2 is refused (--allow-busy runs anyway, and the
 * figures are marked busy and never written to the docs):
 *
 * - enqueue: single adds with 64 in flight;
 * - processing: a queue filled beforehand (untimed, with each library's bulk
 *   add), drained by one worker at concurrency 64, until every job is
 *   finished in Redis (the worker's graceful close);
 * - latency: messages at a light steady rate to an idle worker at concurrency
 *   1, from just before the add to the handler's entry; taken in each round,
 *   after a whole round of it as warm-up, the rounds' samples pooled;
 * - Redis commands per message in each phase, from INFO commandstats (every
 *   command counts, those run inside scripts too), and how many of them were
 *   script calls.
 *
 * Writes the `redis-peers` section of docs/benchmarks.md (bench/doc.ts), unless --only or --peers leave a
 * phase or a library out.
 */
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { tlsOptions } from '../../src/stores/redis/connection.js';
import { parseRedisUrl, type RedisUrlOptions } from '../../src/stores/redis/url.js';
import { describeMachine, inFlight, median, table, whole } from '../common.js';
import { writeSection } from '../doc.js';
import { spawn } from 'node:child_process';
import {
  drain,
  fillBatches,
  inTurn,
  latencyMeasurement,
  kvmqFactory,
  loadText,
  phaseMeasurements,
  ratioText,
  BusyMachineError,
  refuseBusy,
  roundRatios,
  type Measurement,
  type Payload,
  type PeerFactory,
  latencyQuantile,
  resultsByName,
} from './harness.js';
import { peerRequire } from './install.js';
import { peerBenchArgs } from './options.js';

interface Sizes {
  readonly enqueue: number;
  readonly process: number;
  readonly latency: number;
  readonly latencyPerSec: number;
  readonly runs: number;
}

const FULL: Sizes = { enqueue: 20_000, process: 50_000, latency: 2000, latencyPerSec: 500, runs: 3 };
const QUICK: Sizes = { enqueue: 2000, process: 5000, latency: 200, latencyPerSec: 500, runs: 1 };
const IN_FLIGHT = 64;
const CONCURRENCY = 64;
const FILL_BATCH = 1000;
// Targets of the Redis issue: kvmq at least this many times BullMQ's rates, and this p50.
/** kvmq's rates over BullMQ's to reach: warm (one warmed process), and cold (a fresh process per measurement). */
const RATIO_TARGET = { warm: 3, cold: 2.5 } as const;
const P50_TARGET_MS = 1;

// --- BullMQ ----------------------------------------------------------------

interface BullQueue {
  add(name: string, data: Payload): Promise<unknown>;
  addBulk(jobs: { name: string; data: Payload }[]): Promise<unknown>;
  obliterate(options: { force: boolean }): Promise<void>;
  close(): Promise<void>;
}
interface BullWorker {
  waitUntilReady(): Promise<unknown>;
  close(): Promise<void>;
  on(event: 'error', listener: (error: Error) => void): void;
}
interface BullModule {
  Queue: new (name: string, options: object) => BullQueue;
  Worker: new (name: string, processor: (job: { data: Payload }) => Promise<void>, options: object) => BullWorker;
}

function bullmq(url: RedisUrlOptions, module: BullModule): PeerFactory {
  const connection = { ...ioredisOptions(url), maxRetriesPerRequest: null };
  const prefix = 'bench-bullmq';
  return async (queue) => {
    const producer = new module.Queue(queue, { connection, prefix });
    await Promise.resolve();
    return {
      name: 'BullMQ',
      enqueue: (payload) => producer.add('job', payload),
      enqueueBatch: (payloads) => producer.addBulk(payloads.map((data) => ({ name: 'job', data }))),
      async work(concurrency, handler) {
        const worker = new module.Worker(
          queue,
          (job) => {
            handler(job.data);
            return Promise.resolve();
          },
          { connection, prefix, concurrency },
        );
        worker.on('error', (error) => console.error('BullMQ worker:', error.message));
        await worker.waitUntilReady();
        return { stop: () => worker.close() };
      },
      async close() {
        await producer.obliterate({ force: true });
        await producer.close();
      },
    };
  };
}

// --- bee-queue -------------------------------------------------------------

interface BeeJob {
  save(): Promise<unknown>;
}
interface BeeQueue {
  createJob(data: Payload): BeeJob;
  saveAll(jobs: BeeJob[]): Promise<unknown>;
  process(concurrency: number, handler: (job: { data: Payload }) => Promise<void>): void;
  ready(): Promise<unknown>;
  close(timeoutMs?: number): Promise<void>;
  destroy(): Promise<void>;
  on(event: 'error', listener: (error: Error) => void): void;
}
type BeeModule = new (name: string, settings: object) => BeeQueue;

function beeQueue(url: RedisUrlOptions, Bee: BeeModule): PeerFactory {
  const redis = { host: url.nodes[0]?.host, port: url.nodes[0]?.port, db: url.db, password: url.password };
  // The producer keeps no job objects and subscribes to no events: kvmq's producers do neither.
  const common = { redis, prefix: 'bench-bq', getEvents: false, storeJobs: false };
  return async (queue) => {
    const producer = new Bee(queue, { ...common, isWorker: false });
    await producer.ready();
    return {
      name: 'bee-queue',
      enqueue: (payload) => producer.createJob(payload).save(),
      enqueueBatch: (payloads) => producer.saveAll(payloads.map((data) => producer.createJob(data))),
      async work(concurrency, handler) {
        const worker = new Bee(queue, common);
        worker.on('error', (error) => console.error('bee-queue worker:', error.message));
        worker.process(concurrency, (job) => {
          handler(job.data);
          return Promise.resolve();
        });
        await worker.ready();
        return { stop: () => worker.close(60_000) };
      },
      async close() {
        await producer.destroy();
        await producer.close();
      },
    };
  };
}

function ioredisOptions(url: RedisUrlOptions): object {
  return {
    host: url.nodes[0]?.host,
    port: url.nodes[0]?.port,
    db: url.db,
    username: url.username,
    password: url.password,
    tls: url.tls ? tlsOptions(url) : undefined,
  };
}

// --- measurements ----------------------------------------------------------

/** INFO commandstats: calls of every command since the last reset, the bench's own INFO/CONFIG left out. */
class CommandStats {
  constructor(private readonly redis: Redis) {}

  async reset(): Promise<void> {
    await this.redis.config('RESETSTAT');
  }

  async read(): Promise<{ all: number; scripts: number }> {
    const info = await this.redis.info('commandstats');
    let all = 0;
    let scripts = 0;
    for (const [, name, calls] of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
      if (name === undefined || /^(info|config)/.test(name)) continue;
      all += Number(calls);
      if (/^(evalsha|eval|evalsha_ro|eval_ro|fcall|fcall_ro)$/.test(name)) scripts += Number(calls);
    }
    return { all, scripts };
  }
}

interface Phase {
  readonly perSec: number[];
  commands: number;
  scripts: number;
  messages: number;
}

interface Results {
  enqueue: Phase;
  process: Phase;
  latency: number[];
}

function emptyResults(): Results {
  const phase = (): Phase => ({ perSec: [], commands: 0, scripts: 0, messages: 0 });
  return { enqueue: phase(), process: phase(), latency: [] };
}

let queues = 0;
function freshQueue(label: string): string {
  queues += 1;
  return `bench-${Date.now().toString(36)}-${label}-${queues}`;
}

async function measureEnqueue(factory: PeerFactory, n: number, stats: CommandStats, into: Phase): Promise<void> {
  const peer = await factory(freshQueue('enqueue'));
  try {
    await counted(n, stats, into, () => inFlight(n, IN_FLIGHT, (i) => peer.enqueue({ i })));
  } finally {
    await peer.close();
  }
}

async function measureProcess(factory: PeerFactory, n: number, stats: CommandStats, into: Phase): Promise<void> {
  const peer = await factory(freshQueue('process'));
  try {
    await fillBatches(peer, n, FILL_BATCH);
    await counted(n, stats, into, () => drain(peer, n, CONCURRENCY));
  } finally {
    await peer.close();
  }
}

/** Times `run` over n messages and adds its rate and the Redis commands it sent to `into`. */
async function counted(n: number, stats: CommandStats, into: Phase, run: () => Promise<void>): Promise<void> {
  await stats.reset();
  const start = performance.now();
  await run();
  const ms = performance.now() - start;
  const sent = await stats.read();
  into.perSec.push((n * 1000) / ms);
  into.commands += sent.all;
  into.scripts += sent.scripts;
  into.messages += n;
}

// --- report ----------------------------------------------------------------

/** The phase each of rows()'s rows reports, in order: a phase not run leaves its rows out. */
const ROW_PHASES = ['enqueue', 'process', 'latency', 'latency', 'enqueue', 'enqueue', 'process', 'process'];

function rows(
  names: readonly string[],
  results: ReadonlyMap<string, Results>,
  sizes: Sizes,
  phases: ReadonlySet<string>,
  target: number,
): string[][] {
  const get = resultsByName(results, emptyResults);
  const bull = get('BullMQ');
  const kv = get('kvmq');
  const rate = (phase: 'enqueue' | 'process') => names.map((n) => `${whole.format(median(get(n)[phase].perSec))}/s`);
  const ratios = (phase: 'enqueue' | 'process'): number[] => roundRatios(kv[phase].perSec, bull[phase].perSec);
  const ratio = (phase: 'enqueue' | 'process'): number => median(ratios(phase));
  const verdict = (pass: boolean): string => (pass ? 'PASS' : 'FAIL');
  const p = (name: string, q: number): number => latencyQuantile(get(name).latency, q);
  const perMessage = (phase: 'enqueue' | 'process', field: 'commands' | 'scripts') =>
    names.map((n) => {
      const ph = get(n)[phase];
      return ph.messages === 0 ? '' : (ph[field] / ph.messages).toFixed(2);
    });
  const enqueueRatio = ratio('enqueue');
  const processRatio = ratio('process');
  const p50 = p('kvmq', 0.5);
  const all = [
    [
      `enqueue, ${IN_FLIGHT} single adds in flight (msgs/s)`,
      ...rate('enqueue'),
      ratioText(ratios('enqueue')),
      `≥ ×${target}`,
      verdict(enqueueRatio >= target),
    ],
    [
      `processing, concurrency ${CONCURRENCY}, no-op (msgs/s)`,
      ...rate('process'),
      ratioText(ratios('process')),
      `≥ ×${target}`,
      verdict(processRatio >= target),
    ],
    [
      `latency p50, ${sizes.latencyPerSec}/s to an idle worker`,
      ...names.map((n) => `${p(n, 0.5).toFixed(2)} ms`),
      '',
      `kvmq ≤ ${P50_TARGET_MS} ms`,
      verdict(p50 <= P50_TARGET_MS),
    ],
    [
      'latency p99',
      ...names.map((n) => `${p(n, 0.99).toFixed(2)} ms`),
      '',
      "kvmq ≤ BullMQ's",
      verdict(p('kvmq', 0.99) <= p('BullMQ', 0.99)),
    ],
    ['Redis commands per message, enqueue', ...perMessage('enqueue', 'commands'), '', '', ''],
    ['… of which script calls', ...perMessage('enqueue', 'scripts'), '', '', ''],
    ['Redis commands per message, processing', ...perMessage('process', 'commands'), '', '', ''],
    ['… of which script calls', ...perMessage('process', 'scripts'), '', '', ''],
  ];
  return all.filter((_, row) => phases.has(ROW_PHASES[row] ?? ''));
}

// --- main ------------------------------------------------------------------

function peerFactories(store: string, url: RedisUrlOptions): [string, PeerFactory][] {
  const require = peerRequire(['bullmq', 'bee-queue']);
  return [
    ['kvmq', kvmqFactory(store)],
    ['BullMQ', bullmq(url, require('bullmq') as BullModule)],
    ['bee-queue', beeQueue(url, require('bee-queue') as BeeModule)],
  ];
}

async function main(): Promise<void> {
  const args = peerBenchArgs(['enqueue', 'process', 'latency'], ['kvmq', 'BullMQ', 'bee-queue'], 'KVMQ_TEST_REDIS_URL');
  const phases = args.phases;
  const store = args.store;
  if (store === undefined) throw new TypeError('--store redis://HOST:PORT is required (or $KVMQ_TEST_REDIS_URL)');
  const url = parseRedisUrl(store);
  if (url.cluster) throw new TypeError('the peers run on one Redis server: give a URL without cluster=true');
  const preset = args.quick ? QUICK : FULL;
  const sizes = { ...preset, runs: args.rounds ?? preset.runs };
  if (args.child !== undefined) return measureInChild(args.child, store, url, sizes, phases);
  refuseBusy(args.allowBusy || args.quick);
  const machine = describeMachine();
  const peers = peerFactories(store, url);
  const chosen = args.peers;
  peers.splice(0, peers.length, ...peers.filter(([name]) => chosen.has(name)));
  const names = peers.map(([name]) => name);
  const admin = new Redis({ ...ioredisOptions(url), lazyConnect: true });
  await admin.connect();
  const stats = new CommandStats(admin);
  const persistence = await admin.info('persistence');
  const aof = /^aof_enabled:1/m.test(persistence) ? 'AOF on' : 'AOF off';
  const fsync = (await admin.config('GET', 'appendfsync').catch(() => [])) as string[];
  const durability = `${aof}, appendfsync ${fsync[1] ?? '?'}`;
  const version = /^redis_version:(\S+)/m.exec(await admin.info('server'))?.[1] ?? '?';
  const results = new Map(names.map((name) => [name, emptyResults()]));
  const measureOne = { enqueue: measureEnqueue, process: measureProcess };
  const measurements = args.cold
    ? coldMeasurements(store, phases, results, args.quick)
    : phaseMeasurements(THROUGHPUT, phases, sizes, results, emptyResults, (phase: Throughput, factory, n, into) =>
        measureOne[phase](factory, n, stats, into[phase]),
      );
  let loads: number[] = [];
  try {
    const latency = { messages: sizes.latency, perSec: sizes.latencyPerSec, concurrency: 1 };
    const latencyPhase = { options: latency, freshQueue: () => freshQueue('latency'), results };
    const timed = phases.has('latency') ? [...measurements, latencyMeasurement(latencyPhase)] : measurements;
    loads = await inTurn(peers, sizes.runs, timed);
  } finally {
    admin.disconnect();
  }

  const header = ['measurement', ...names, 'kvmq/BullMQ', 'target', 'result'];
  const target = args.cold ? RATIO_TARGET.cold : RATIO_TARGET.warm;
  const body = rows(names, results, sizes, phases, target);
  const failed = body.filter((r) => r.at(-1) === 'FAIL').map((r) => r[0]);
  const load = loadText(loads);
  const verdict =
    (failed.length === 0 ? 'all targets PASS' : `FAIL: ${failed.join('; ')}`) +
    (load.busy ? ' (taken on a busy machine: not a verdict)' : '');
  const setup =
    `Redis ${version} at ${url.where} (${durability}); ${args.cold ? 'cold, a fresh process per measurement' : 'warm, one process'}; ` +
    `${sizes.runs} round(s), rates the median, ratios the median of per-round ratios (their range in brackets); ` +
    `enqueue ${sizes.enqueue} msgs, processing ${sizes.process} msgs, latency ${sizes.latency} msgs; ${load.text}`;
  console.log(`kvmq vs BullMQ vs bee-queue on Redis${args.quick ? ', quick' : ''}\n${machine}\n${setup}\n`);
  console.log(table(header, body, false));
  console.log(`\n${verdict}`);
  const partial = phases.size < 3 || names.length < 3;
  if (args.noWrite || args.quick || partial || load.busy) return;
  const command = `node --import tsx bench/peers/redis.ts ${process.argv.slice(2).join(' ')}`.trim();
  const when = new Date().toISOString().replace('T', ' ').slice(0, 16);
  const section = `## redis${args.cold ? '-cold' : ''}: kvmq, BullMQ and bee-queue side by side

- Date: ${when} UTC
- Command: \`${command}\` (bench/peers/redis.ts)
- Machine: ${machine}. Shared and noisy: the ratios measured in one run matter more than the rates.
- Setup: ${setup}. Each library in its default configuration (bee-queue's producer keeps no job objects and
  subscribes to no events); kvmq, BullMQ and bee-queue keep finished jobs until their own cleanup.
- Redis commands per message count every command Redis ran (INFO commandstats), those run inside scripts too.

${table(header, body, true)}

Targets: kvmq ≥ ×${target} BullMQ's enqueue and processing rates (median of per-round ratios), kvmq's p50 ≤ ${P50_TARGET_MS} ms and p99 ≤ BullMQ's: ${verdict}.
`;
  const name = args.cold ? 'redis-peers-cold' : 'redis-peers';
  writeSection(fileURLToPath(new URL('../../docs/benchmarks.md', import.meta.url)), name, section);
  console.log(`wrote the ${name} section of docs/benchmarks.md`);
}

type Throughput = 'enqueue' | 'process';
const THROUGHPUT: readonly (readonly [Throughput, string])[] = [
  ['enqueue', 'enqueue'],
  ['process', 'processing'],
];

/** --cold: each measurement in a fresh child process (--child), its figures read back; nothing to warm up. */
function coldMeasurements(
  store: string,
  phases: ReadonlySet<string>,
  results: Map<string, Results>,
  quick: boolean,
): Measurement[] {
  const self = fileURLToPath(import.meta.url);
  return THROUGHPUT.filter(([phase]) => phases.has(phase)).map(([phase, label]) => ({
    label: `${label}, cold`,
    async run(name, _factory, warmUp) {
      if (warmUp) return;
      const args = ['--import', 'tsx', self, '--child', name, '--only', phase, '--store', store];
      if (quick) args.push('--quick');
      const output = await childOutput(args);
      const figures = JSON.parse(output.trim().split('\n').at(-1) ?? '') as Phase;
      const into = results.get(name)?.[phase];
      if (into === undefined) return;
      into.perSec.push(...figures.perSec);
      into.commands += figures.commands;
      into.scripts += figures.scripts;
      into.messages += figures.messages;
    },
  }));
}

/** Runs node with `args`; resolves to its stdout. */
function childOutput(args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(output) : reject(new Error(`a cold run exited with ${code}`))));
  });
}

/** --child NAME --only PHASE: one measurement of one library, its figures printed as one JSON line. */
async function measureInChild(
  name: string,
  store: string,
  url: RedisUrlOptions,
  sizes: Sizes,
  phases: ReadonlySet<string>,
): Promise<void> {
  const phase = THROUGHPUT.map(([p]) => p).find((p) => phases.has(p));
  if (phase === undefined || phases.size !== 1) throw new TypeError('--child takes one --only enqueue|process');
  const factory = peerFactories(store, url).find(([peer]) => peer === name)?.[1];
  if (factory === undefined) throw new TypeError(`--child: no library named ${JSON.stringify(name)}`);
  const admin = new Redis({ ...ioredisOptions(url), lazyConnect: true });
  await admin.connect();
  try {
    const figures = emptyResults()[phase];
    const measure = phase === 'enqueue' ? measureEnqueue : measureProcess;
    await measure(factory, sizes[phase], new CommandStats(admin), figures);
    console.log(JSON.stringify(figures));
  } finally {
    admin.disconnect();
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof BusyMachineError ? `bench: ${error.message}` : error);
  process.exitCode = 1;
});
