/**
 * `node --import tsx bench/peers/postgres.ts --store postgres://USER@HOST:PORT/DB [--quick] [--no-write]
 *   [--only enqueue,batch,process,latency] [--peers kvmq,pg-boss,graphile-worker]`
 *
 * kvmq on PostgreSQL side by side with pg-boss and graphile-worker, in one run, on one PostgreSQL
 * server (so the same durability: its fsync and synchronous_commit), with no-op handlers. Each library
 * is measured in turn, run after run, so drift on a noisy machine hits all three alike:
 *
 * - enqueue: single adds with 64 in flight;
 * - batch: adds of 1,000 messages per call, one call after another;
 * - processing: a queue filled beforehand (untimed, batches of 1,000), drained by one worker at
 *   concurrency 64, until every job is finished in the database (the worker's graceful stop); ANALYZE
 *   runs after each library's fill, as autovacuum does on a running server, so every library's
 *   statements plan with statistics of the filled table;
 * - latency: messages at 500/s to an idle worker, the processing phase's (concurrency 64), from just
 *   before the add to the handler's entry (at concurrency 1, a batch of one, pg-boss's worker fell far
 *   behind 500/s in a trial, p50 0.3 s and p99 42 s over 200 messages: a figure of its backlog); taken in
 *   each round like the other phases, after a whole round of it as warm-up, the rounds' samples pooled;
 * - WAL bytes per message in each throughput phase (pg_current_wal_lsn before and after): what each
 *   library writes for a message.
 *
 * Each library at its fastest documented settings (bench/peers/postgres-peers.ts): pg-boss with
 * LISTEN/NOTIFY wake-ups, 0.5 s polling, fetches of 500 jobs in burst mode, `insert` for batches, no
 * supervision; graphile-worker as its performance page runs it: a local queue of 500, batched
 * completions, a pool of concurrency + 2; the producers' pools of 64 connections (one per add in
 * flight); kvmq with its defaults but two: its queues keep no successes (`keepDone: 0`, KVMQ_CONFIG), and its
 * worker claims ahead of its free slots (`prefetch`, kvmqWorkerOptions). Each worker holds up to 500 jobs at once
 * (HELD): graphile-worker's local queue, pg-boss's batch, kvmq's concurrency and prefetch.
 * Without a kvmq PostgreSQL store (connect() answers "unknown store URL"), kvmq's column is skipped with a
 * note and the peers still run.
 *
 * Writes the `postgres-peers` section of docs/benchmarks.md (bench/doc.ts), unless --quick, --only or
 * --peers (or a skipped kvmq) leave something out.
 */
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { describeMachine, inFlight, median, table, tenths, whole } from '../common.js';
import { cpuByName, cpuSince } from '../process-cpu.js';
import { writeSection } from '../doc.js';
import { peerRequire } from './install.js';
import {
  drain,
  fillBatches,
  inTurn,
  latencyMeasurement,
  loadText,
  ratioText,
  roundRatios,
  refuseBusy,
  BusyMachineError,
  phaseMeasurements,
  type Peer,
  type PeerFactory,
  latencyQuantile,
  resultsByName,
} from './harness.js';
import { peerBenchArgs } from './options.js';
import {
  graphileWorkerPeer,
  kvmqPeer,
  kvmqWorkerOptions,
  HELD,
  pgBossPeer,
  PRODUCER_POOL,
  type BossModule,
  type GraphileModule,
} from './postgres-peers.js';

interface Sizes {
  readonly enqueue: number;
  readonly batch: number;
  readonly process: number;
  readonly latency: number;
  readonly latencyPerSec: number;
  readonly runs: number;
}

const FULL: Sizes = { enqueue: 20_000, batch: 50_000, process: 50_000, latency: 2000, latencyPerSec: 500, runs: 3 };
const QUICK: Sizes = { enqueue: 2000, batch: 5000, process: 5000, latency: 200, latencyPerSec: 500, runs: 1 };
const IN_FLIGHT = 64;
const CONCURRENCY = 64;
const BATCH = 1000;
const PHASES = ['enqueue', 'batch', 'process', 'latency'] as const;
const PEERS = ['kvmq', 'pg-boss', 'graphile-worker'] as const;

type Throughput = 'enqueue' | 'batch' | 'process';

interface Phase {
  readonly perSec: number[];
  walBytes: number;
  /** CPU spent while timed: by every `postgres` process of this machine (none for a remote server), and by this one. */
  serverCpuMs: number;
  ownCpuMs: number;
  messages: number;
}

type Results = Record<Throughput, Phase> & { latency: number[] };

function emptyResults(): Results {
  const phase = (): Phase => ({ perSec: [], walBytes: 0, serverCpuMs: 0, ownCpuMs: 0, messages: 0 });
  return { enqueue: phase(), batch: phase(), process: phase(), latency: [] };
}

let queues = 0;
function freshQueue(label: string): string {
  queues += 1;
  return `bench_${Date.now().toString(36)}_${label}_${queues}`;
}

/** The bench's own connection: the server's settings, the WAL position, ANALYZE. */
class Admin {
  constructor(private readonly client: pg.Client) {}

  async show(setting: string): Promise<string> {
    const result = await this.client.query<Record<string, string>>(`SHOW ${setting}`);
    return Object.values(result.rows[0] ?? {})[0] ?? '?';
  }

  async walPosition(): Promise<string> {
    return (await this.client.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')).rows[0]?.lsn ?? '0/0';
  }

  async walSince(position: string): Promise<number> {
    const sql = 'SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::float8 AS bytes';
    return (await this.client.query<{ bytes: number }>(sql, [position])).rows[0]?.bytes ?? 0;
  }

  /** ANALYZE on every table of the database. */
  async analyze(): Promise<void> {
    await this.client.query('ANALYZE');
  }
}

const none = (): Promise<void> => Promise.resolve();

/** Times one throughput phase on a fresh queue: `prepare` untimed, then `timed`, with the WAL it wrote. */
async function measure(
  factory: PeerFactory,
  admin: Admin,
  into: Phase,
  n: number,
  prepare: (peer: Peer) => Promise<void>,
  timed: (peer: Peer) => Promise<void>,
): Promise<void> {
  const peer = await factory(freshQueue('tp'));
  try {
    await prepare(peer);
    const position = await admin.walPosition();
    const server = cpuByName('postgres');
    const own = process.cpuUsage();
    const start = performance.now();
    await timed(peer);
    const ms = performance.now() - start;
    const ownCpu = process.cpuUsage(own);
    into.serverCpuMs += cpuSince('postgres', server);
    into.ownCpuMs += (ownCpu.user + ownCpu.system) / 1000;
    into.walBytes += await admin.walSince(position);
    into.perSec.push((n * 1000) / ms);
    into.messages += n;
  } finally {
    await peer.close();
  }
}

function measureEnqueue(factory: PeerFactory, admin: Admin, n: number, into: Phase): Promise<void> {
  return measure(factory, admin, into, n, none, (peer) => inFlight(n, IN_FLIGHT, (i) => peer.enqueue({ i })));
}

function measureBatch(factory: PeerFactory, admin: Admin, n: number, into: Phase): Promise<void> {
  return measure(factory, admin, into, n, none, (peer) => fillBatches(peer, n, BATCH));
}

function measureProcess(factory: PeerFactory, admin: Admin, n: number, into: Phase): Promise<void> {
  const fill = async (peer: Peer): Promise<void> => {
    await fillBatches(peer, n, BATCH);
    await admin.analyze();
  };
  return measure(factory, admin, into, n, fill, (peer) => drain(peer, n, CONCURRENCY));
}

// --- report ----------------------------------------------------------------

/** The table's rows, those of the phases that ran. */
function rows(
  names: readonly string[],
  results: ReadonlyMap<string, Results>,
  sizes: Sizes,
  phases: ReadonlySet<string>,
): string[][] {
  const get = resultsByName(results, emptyResults);
  const others = names.filter((name) => name !== 'kvmq');
  const withKvmq = names.includes('kvmq');
  const rateRow = (label: string, phase: Throughput): string[] => [
    label,
    ...names.map((n) => `${whole.format(median(get(n)[phase].perSec))}/s`),
    ...(withKvmq ? others.map((o) => ratioText(roundRatios(get('kvmq')[phase].perSec, get(o)[phase].perSec))) : []),
  ];
  const p = (name: string, q: number): number => latencyQuantile(get(name).latency, q);
  const blank = withKvmq ? others.map(() => '') : [];
  const latencyRow = (label: string, q: number): string[] => [
    label,
    ...names.map((n) => `${p(n, q).toFixed(2)} ms`),
    ...blank,
  ];
  const perMessageRow = (label: string, phase: Throughput, of: (ph: Phase) => number, format: Intl.NumberFormat) => [
    label,
    ...names.map((n) => {
      const ph = get(n)[phase];
      return ph.messages === 0 ? '' : format.format(of(ph) / ph.messages);
    }),
    ...blank,
  ];
  const walRow = (label: string, phase: Throughput): string[] =>
    perMessageRow(label, phase, (ph) => ph.walBytes, whole);
  // The server's CPU is read from /proc: a server on another machine shows none.
  const cpuRow = (label: string, phase: Throughput, of: (ph: Phase) => number): string[] =>
    perMessageRow(label, phase, (ph) => of(ph) * 1000, tenths);
  const all: [phase: string, row: string[]][] = [
    ['enqueue', rateRow(`enqueue, ${IN_FLIGHT} single adds in flight (msgs/s)`, 'enqueue')],
    ['batch', rateRow(`enqueue batched, ${BATCH} per call (msgs/s)`, 'batch')],
    ['process', rateRow(`processing, concurrency ${CONCURRENCY}, no-op (msgs/s)`, 'process')],
    ['latency', latencyRow(`latency p50, ${sizes.latencyPerSec}/s to an idle worker`, 0.5)],
    ['latency', latencyRow('latency p99', 0.99)],
    ['enqueue', walRow('WAL bytes per message, enqueue', 'enqueue')],
    ['batch', walRow('WAL bytes per message, batched enqueue', 'batch')],
    ['process', walRow('WAL bytes per message, processing', 'process')],
    ['process', cpuRow('PostgreSQL CPU per message, processing (µs)', 'process', (ph) => ph.serverCpuMs)],
    ['process', cpuRow("the worker process's CPU per message, processing (µs)", 'process', (ph) => ph.ownCpuMs)],
  ];
  return all.filter(([phase]) => phases.has(phase)).map(([, row]) => row);
}

// --- main ------------------------------------------------------------------

async function main(): Promise<void> {
  const args = peerBenchArgs(PHASES, PEERS, 'KVMQ_TEST_POSTGRES_URL');
  const phases = args.phases;
  const chosen = args.peers;
  const store = args.store;
  if (store === undefined || !/^postgres(ql)?:\/\//i.test(store)) {
    throw new TypeError('--store postgres://USER@HOST:PORT/DB is required (or $KVMQ_TEST_POSTGRES_URL)');
  }
  const preset = args.quick ? QUICK : FULL;
  const sizes = { ...preset, runs: args.rounds ?? preset.runs };
  if (args.cold || args.child !== undefined) throw new TypeError('--cold is a flag of bench/peers/redis.ts only');
  refuseBusy(args.allowBusy || args.quick);
  const machine = describeMachine();
  const client = new pg.Client({ connectionString: store });
  await client.connect();
  const admin = new Admin(client);
  const require = peerRequire(['pg-boss', 'graphile-worker']);
  const peers: [string, PeerFactory][] = [];
  let skipped: string | null = null;
  if (chosen.has('kvmq')) {
    const kvmq = await kvmqPeer(store);
    if (typeof kvmq === 'string') skipped = kvmq;
    else peers.push(['kvmq', kvmq]);
  }
  if (skipped !== null) process.stderr.write(`bench: kvmq skipped: ${skipped}\n`);
  if (chosen.has('pg-boss')) {
    peers.push(['pg-boss', pgBossPeer(store, require('pg-boss') as BossModule)]);
  }
  if (chosen.has('graphile-worker')) {
    peers.push(['graphile-worker', graphileWorkerPeer(store, require('graphile-worker') as GraphileModule)]);
  }
  const names = peers.map(([name]) => name);
  const version = await admin.show('server_version');
  const durability = `fsync ${await admin.show('fsync')}, synchronous_commit ${await admin.show('synchronous_commit')}`;
  const where = `${client.host}:${client.port}/${client.database ?? '?'}`;
  const results = new Map(names.map((name) => [name, emptyResults()]));
  const measureOne = { enqueue: measureEnqueue, batch: measureBatch, process: measureProcess };
  const measurements = phaseMeasurements(
    [
      ['enqueue', 'enqueue'],
      ['batch', 'batched enqueue'],
      ['process', 'processing'],
    ],
    phases,
    sizes,
    results,
    emptyResults,
    (phase: Throughput, factory, n, into) => measureOne[phase](factory, admin, n, into[phase]),
  );
  let loads: number[] = [];
  try {
    const latency = { messages: sizes.latency, perSec: sizes.latencyPerSec, concurrency: CONCURRENCY };
    const latencyPhase = { options: latency, freshQueue: () => freshQueue('latency'), results };
    const timed = phases.has('latency') ? [...measurements, latencyMeasurement(latencyPhase)] : measurements;
    loads = await inTurn(peers, sizes.runs, timed);
  } finally {
    await client.end();
  }

  const others = names.filter((name) => name !== 'kvmq');
  const header = ['measurement', ...names, ...(names.includes('kvmq') ? others.map((o) => `kvmq/${o}`) : [])];
  const body = rows(names, results, sizes, phases);
  const load = loadText(loads);
  const setup =
    `PostgreSQL ${version} at ${where} (${durability}); ${sizes.runs} round(s), rates the median, ratios the median of per-round ratios (their range in brackets); ` +
    `enqueue ${sizes.enqueue} msgs, batched ${sizes.batch} msgs, processing ${sizes.process} msgs, ` +
    `latency ${sizes.latency} msgs; ${load.text}`;
  const title = names.join(' vs ');
  console.log(`${title} on PostgreSQL${args.quick ? ', quick' : ''}\n${machine}\n${setup}\n`);
  if (skipped !== null) console.log(`kvmq skipped: ${skipped}\n`);
  console.log(table(header, body, false));
  const partial = phases.size < PHASES.length || names.length < PEERS.length;
  if (args.noWrite || args.quick || partial || load.busy) return;
  const command = `node --import tsx bench/peers/postgres.ts ${process.argv.slice(2).join(' ')}`.trim();
  const when = new Date().toISOString().replace('T', ' ').slice(0, 16);
  const section = `## postgres: kvmq, pg-boss and graphile-worker side by side

- Date: ${when} UTC
- Command: \`${command}\` (bench/peers/postgres.ts)
- Machine: ${machine}. Shared and noisy: the ratios measured in one run matter more than the rates.
- Setup: ${setup}. No-op handlers. Processing drains a queue filled beforehand (untimed), one worker at
  concurrency ${CONCURRENCY}, until its graceful stop. Latency: from just before the add to the handler's entry, to
  the same worker, idle between messages, in each round after a warm-up round, the rounds' samples pooled (at
  concurrency 1, a batch of one, pg-boss's worker fell far behind ${sizes.latencyPerSec}/s in a trial, p50 0.3 s and
  p99 42 s over 200 messages: a figure of its backlog).
- Each library at its fastest documented settings. **pg-boss**: LISTEN/NOTIFY wake-ups (\`useListenNotify\`,
  the queue's \`notify\`), \`pollingIntervalSeconds\` and \`notifyPollingIntervalSeconds\` at their 0.5 s
  floor, \`batchSize: ${HELD}\` with \`burstWhenBatchFull\` (one fetch loop drained faster than several, and
  a batch of ${HELD} faster than one of ${CONCURRENCY}), \`insert\` for batches, \`supervise\` and \`schedule\` off in
  the bench's instances;
  **ANALYZE runs after each library's fill**, as autovacuum does on a running server, so every library plans
  with statistics of the filled table.
  **graphile-worker**, as its performance page runs it: \`localQueue: { size: ${HELD} }\`,
  \`completeJobBatchDelay: 0\`, \`failJobBatchDelay: 0\`, a worker pool of concurrency + 2 connections,
  \`addJobs\` for batches. Both producers' pools: ${PRODUCER_POOL} connections, one per add in flight. **kvmq**:
  its defaults (\`connect(url)\`, with \`maintenance: false\` as in every peer bench) but two: \`keepDone: 0\`,
  and a worker that claims ahead of its free slots (\`prefetch: ${kvmqWorkerOptions(CONCURRENCY).prefetch}\`). Each
  worker holds up to ${HELD} jobs at once: graphile-worker's local queue, pg-boss's batch, kvmq's concurrency and
  prefetch.
- Single adds: kvmq's client gathers the adds made in one tick into one store call (src/client/tick-batcher.ts);
  pg-boss's \`send\` and graphile-worker's \`addJob\` commit each add on its own, so with fsync on they wait
  for a flush each (PostgreSQL flushes concurrent commits together).
- Finished jobs: pg-boss keeps them until its own cleanup; graphile-worker deletes a job once it succeeds,
  and so does kvmq's finish on a queue that keeps no successes (\`keepDone: 0\`; with the default, kept until
  GC, kvmq processes fewer a second: docs/benchmarks.md, _Successes removed at their finish on PostgreSQL_).
- WAL bytes per message: \`pg_current_wal_lsn()\` before and after each timed phase, over the messages of all
  runs. Whatever else the server wrote meanwhile counts too, such as the full-page images a checkpoint
  brings: one phase's figure can jump between runs.

${table(header, body, true)}
`;
  writeSection(fileURLToPath(new URL('../../docs/benchmarks.md', import.meta.url)), 'postgres-peers', section);
  console.log('wrote the postgres-peers section of docs/benchmarks.md');
}

main().catch((error: unknown) => {
  console.error(error instanceof BusyMachineError ? `bench: ${error.message}` : error);
  // A worker that failed mid-run may still hold connections and timers open.
  process.exit(1);
});
