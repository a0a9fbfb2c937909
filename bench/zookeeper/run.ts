/**
 * `node --import tsx bench/zookeeper/run.ts [--store zookeeper://HOST:PORT] [--backlog N] [--quick] [--no-write]
 *   [--peers-only]`
 *
 * kvmq on ZooKeeper, in one command: starts a ZooKeeper of its own (heap for a deep backlog) unless a server is
 * given (--store, or $KVMQ_TEST_ZOOKEEPER_URL under `node scripts/servers.mjs run zookeeper -- ...`), installs
 * the peers' Debian packages when missing, creates the chroots kvmq needs, and then:
 *
 * 1. the physical limit: ZooKeeper's raw create rate (one create per transaction, 64 in flight, through
 *    bench/raw/zookeeper.ts) and kvmq's full lifecycle at concurrency 64, round after round, with the
 *    transactions kvmq spends per message counted from the server's zxid; kvmq's rate over
 *    raw transactions/s ÷ kvmq's transactions per message;
 * 2. side by side with kazoo's LockingQueue and Curator's lock-safe DistributedQueue, each driven by a small
 *    program of kvmq's own (kazoo_queue.py, CuratorQueue.java compiled here): acknowledged puts with 8 in
 *    flight, then the consume rate with one and with eight consumers, each library in turn, run after run;
 *
 * and writes the `zookeeper-peers` section of docs/benchmarks.md. Then it runs the standard bench
 * (`bench/run.ts --store URL/CHROOT --backlog N`), which writes the `zookeeper` section.
 */
import { execFile, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { classpath, fourLetterWord, start } from '../../scripts/servers/zookeeper.mjs';
import { ZkSession } from '../../src/stores/zookeeper/client.js';
import { connect } from '../../src/index.js';
import {
  describeMachine,
  freshQueues,
  inFlight,
  median,
  signal,
  step,
  table,
  whole,
  type BenchSizes,
} from '../common.js';
import { writeSection } from '../doc.js';
import { measureLifecycle } from '../lifecycle.js';
import { oneByOne } from '../one-by-one.js';
import { measureRaw } from '../raw/zookeeper.js';
import { storeOf } from '../../src/client/client-store.js';

const run = promisify(execFile);
const HERE = fileURLToPath(new URL('.', import.meta.url));
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const PACKAGES = ['zookeeper', 'python3-kazoo', 'libcurator-recipes-java'];
// Debian's kazoo is for Debian's Python, whatever python3 comes first on PATH.
const PYTHON = '/usr/bin/python3';
const CURATOR_JARS = ['curator-recipes', 'curator-framework', 'curator-client', 'guava'].map(
  (name) => `/usr/share/java/${name}.jar`,
);
const PUTS_IN_FLIGHT = 8;
const CONSUMERS = [1, 8] as const;
const LIFECYCLE_CONCURRENCY = 64;
/** kvmq's worker claims this many messages ahead of its free slots in the side-by-side consume runs. */
const PREFETCH = 16;
// Raw creates per round, as a multiple of the lifecycle's messages: single creates run about 4 times faster.
const RAW_FACTOR = 4;
// Messages sent one at a time to count the transactions each takes.
const ONE_BY_ONE = 200;
// Targets of the ZooKeeper issue.
const LIMIT_FRACTION_TARGET = 0.8;
const CURATOR_TARGET = 3;
const KAZOO_TARGET = 10;

interface Sizes {
  /** Raw creates and lifecycle messages per round. */
  readonly limitN: number;
  readonly peerN: number;
  readonly runs: number;
}
const FULL: Sizes = { limitN: 10_000, peerN: 2000, runs: 5 };
const QUICK: Sizes = { limitN: 2000, peerN: 200, runs: 1 };

// --- setup -----------------------------------------------------------------

function ensurePackages(): void {
  const missing = PACKAGES.filter((name) => {
    const query = spawnSync('dpkg-query', ['-W', '-f=${Status}', name], { encoding: 'utf8' });
    return query.status !== 0 || !query.stdout.includes('install ok installed');
  });
  if (missing.length === 0) return;
  if (process.getuid?.() !== 0) {
    throw new Error(`the ZooKeeper bench needs: sudo apt-get install ${missing.join(' ')}`);
  }
  process.stderr.write(`bench: installing ${missing.join(', ')} (apt-get)\n`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  for (const args of [
    ['update', '-qq'],
    ['install', '-y', '-qq', '--no-install-recommends', ...missing],
  ]) {
    const apt = spawnSync('apt-get', args, { stdio: 'inherit', env });
    if (apt.status !== 0) throw new Error(`apt-get ${args.join(' ')} failed`);
  }
}

/** Creates /name at the server's root and returns kvmq's URL for it. */
async function createChroot(hosts: string, name: string): Promise<string> {
  const zk = await ZkSession.open({
    hosts,
    chroot: '',
    auth: null,
    sessionTimeoutMs: 10_000,
    requestTimeoutMs: 30_000,
  });
  try {
    await zk.create(`/${name}`);
  } finally {
    zk.close();
  }
  return `zookeeper://${hosts}/${name}`;
}

/** The server's last transaction id: every write (and session open or close) moves it by one. */
async function zxid(port: number): Promise<number> {
  const reply = await fourLetterWord(port, 'srvr');
  const hex = /Zxid: 0x([0-9a-f]+)/i.exec(reply)?.[1];
  if (hex === undefined) throw new Error(`no Zxid in the server's srvr reply: ${JSON.stringify(reply)}`);
  return Number.parseInt(hex, 16);
}

// --- the physical limit ----------------------------------------------------

interface LimitFigures {
  /** Server transactions per message, messages sent one at a time. */
  oneByOne: number;
  rawPerSec: number[];
  /** Raw creates in multis of 1000: the server's rate for operations that ride in multis, as kvmq's do. */
  rawOpsPerSec: number[];
  kvmqPerSec: number[];
  transactions: number;
  /** Write operations (each one of a multi) and reads kvmq sent over the lifecycle runs. */
  writeOps: number;
  reads: number;
  readRequests: number;
  messages: number;
}

async function measureLimit(url: string, port: number, sizes: Sizes, into: LimitFigures): Promise<void> {
  const bench: BenchSizes = {
    // Single creates (the transaction rate) and creates in multis of 1000 (the operation rate), each run long
    // enough (seconds, as the lifecycle's) that a burst of other load on the machine moves it no more.
    enqueueSingle: RAW_FACTOR * sizes.limitN,
    enqueueBatched: 2 * RAW_FACTOR * sizes.limitN,
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
  const raw = await measureRaw(url, bench);
  into.rawPerSec.push(raw.single.perSec);
  into.rawOpsPerSec.push(raw.batched.perSec);
  const client = await connect(url);
  const sent = (storeOf(client) as unknown as { zk: ZkSession }).zk.sent;
  const queues = freshQueues('limit');
  try {
    const before = await zxid(port);
    const { writes, reads, readRequests } = sent;
    const figure = await measureLifecycle(
      { client, sizes: bench, queue: queues.queue },
      LIFECYCLE_CONCURRENCY,
      sizes.limitN,
    );
    into.transactions += (await zxid(port)) - before;
    into.writeOps += sent.writes - writes;
    into.reads += sent.reads - reads;
    into.readRequests += sent.readRequests - readRequests;
    into.messages += sizes.limitN + Math.round(sizes.limitN * bench.warmFraction);
    into.kvmqPerSec.push(figure.perSec);
    await client.clear(...queues.made);
  } finally {
    await client.close();
  }
}

/**
 * Messages one at a time (enqueue, wait until the worker has finished it) through a concurrency-1 worker:
 * the server's zxid delta over them is the transactions a message takes, with nothing batched.
 */
async function transactionsOneByOne(url: string, port: number, n: number): Promise<number> {
  const client = await connect(url);
  const queue = freshName('one-by-one');
  try {
    const one = await oneByOne(client, queue, 200, 2);
    const before = await zxid(port);
    await one.send(n);
    const transactions = (await zxid(port)) - before;
    await one.worker.stop();
    await client.clear(queue);
    return transactions / n;
  } finally {
    await client.close();
  }
}

// --- side by side ----------------------------------------------------------

interface PeerRun {
  readonly putMs: number;
  readonly consumeMs: number;
}
type Peer = (n: number, consumers: number) => Promise<PeerRun>;

let queueCount = 0;
function freshName(label: string): string {
  queueCount += 1;
  return `bench-${Date.now().toString(36)}-${label}-${queueCount}`;
}

function kvmqPeer(url: string, prefetch: number): Peer {
  return async (n, consumers) => {
    const client = await connect(url);
    const queue = freshName(`kvmq-c${consumers}-p${prefetch}`);
    try {
      const putStart = performance.now();
      await inFlight(n, PUTS_IN_FLIGHT, (i) => client.enqueue(queue, { i }));
      const putMs = performance.now() - putStart;
      let handled = 0;
      const all = signal();
      const consumeStart = performance.now();
      const worker = client.worker(
        queue,
        () => {
          handled += 1;
          if (handled === n) all.fire();
        },
        { concurrency: consumers, prefetch },
      );
      await all.promise;
      // The graceful stop returns once every finish is in ZooKeeper.
      await worker.stop();
      const consumeMs = performance.now() - consumeStart;
      await client.clear(queue);
      return { putMs, consumeMs };
    } finally {
      await client.close();
    }
  };
}

async function external(command: string, args: string[]): Promise<PeerRun> {
  const { stdout } = await run(command, args, { maxBuffer: 16 * 1024 * 1024, timeout: 600_000 });
  const last = stdout.trim().split('\n').at(-1) ?? '';
  return JSON.parse(last) as PeerRun;
}

function kazooPeer(hosts: string, root: string): Peer {
  return (n, consumers) =>
    external(PYTHON, [
      join(HERE, 'kazoo_queue.py'),
      hosts,
      `/${root}/${freshName(`kazoo-c${consumers}`)}`,
      String(n),
      String(PUTS_IN_FLIGHT),
      String(consumers),
    ]);
}

function curatorPeer(hosts: string, root: string, classes: string): Peer {
  return (n, consumers) =>
    external('java', [
      '-Dorg.slf4j.simpleLogger.defaultLogLevel=warn',
      '-cp',
      classpath([...CURATOR_JARS, classes]),
      'CuratorQueue',
      hosts,
      `/${root}/${freshName(`curator-c${consumers}`)}`,
      String(n),
      String(consumers),
    ]);
}

function compileCurator(dir: string): void {
  const javac = spawnSync(
    'javac',
    ['-nowarn', '-cp', classpath(CURATOR_JARS), '-d', dir, join(HERE, 'CuratorQueue.java')],
    { stdio: 'inherit' },
  );
  if (javac.status !== 0) throw new Error('javac CuratorQueue.java failed (is a JDK installed?)');
}

// --- report ----------------------------------------------------------------

const PEERS = ['kvmq', 'kvmq, prefetch 0', 'Curator', 'kazoo'] as const;
type PeerName = (typeof PEERS)[number];
type PeerResults = Record<PeerName, { put: number[]; consume: Record<number, number[]> }>;

const verdict = (pass: boolean): string => (pass ? 'PASS' : 'FAIL');

function limitRows(limit: LimitFigures): string[][] {
  const raw = median(limit.rawPerSec);
  const kvmq = median(limit.kvmqPerSec);
  const perMessage = limit.transactions / limit.messages;
  const physical = raw / limit.oneByOne;
  const fraction = kvmq / physical;
  const rawOps = median(limit.rawOpsPerSec);
  const opsPerMessage = limit.writeOps / limit.messages;
  const opsLimit = rawOps / opsPerMessage;
  const spread = (v: number[]): string => v.map((x) => whole.format(x)).join(', ');
  return [
    [
      'raw creates, 1 per transaction, 64 in flight',
      `${whole.format(raw)} txn/s`,
      `runs: ${spread(limit.rawPerSec)}`,
      '',
      '',
    ],
    [
      `kvmq full lifecycle, concurrency ${LIFECYCLE_CONCURRENCY}`,
      `${whole.format(kvmq)} msgs/s`,
      `runs: ${spread(limit.kvmqPerSec)}`,
      '',
      '',
    ],
    [
      'ZooKeeper transactions per message, one at a time',
      limit.oneByOne.toFixed(2),
      `zxids over ${ONE_BY_ONE} msgs, each enqueued once the last was finished: enqueue, claim, finish`,
      '',
      '',
    ],
    ['physical limit (raw txn/s ÷ txn per message)', `${whole.format(physical)} msgs/s`, '', '', ''],
    [
      'kvmq as a fraction of the physical limit',
      fraction.toFixed(2),
      '',
      `≥ ${LIMIT_FRACTION_TARGET}`,
      verdict(fraction >= LIMIT_FRACTION_TARGET),
    ],
    [
      'ZooKeeper transactions per message in the lifecycle',
      perMessage.toFixed(3),
      `${limit.transactions} zxids over ${limit.messages} msgs: under load one multi carries many messages`,
      '',
      '',
    ],
    ['raw creates in multis of 1000', `${whole.format(rawOps)} ops/s`, `runs: ${spread(limit.rawOpsPerSec)}`, '', ''],
    [
      'ZooKeeper write operations per kvmq message',
      opsPerMessage.toFixed(2),
      `${limit.writeOps} ops over ${limit.messages} msgs; reads besides: ${(limit.reads / limit.messages).toFixed(2)} per msg in ${(limit.readRequests / limit.messages).toFixed(2)} requests (the status check after each run included)`,
      '',
      '',
    ],
    ['limit by operations (raw ops/s ÷ ops per message)', `${whole.format(opsLimit)} msgs/s`, '', '', ''],
    ['kvmq as a fraction of the limit by operations', (kvmq / opsLimit).toFixed(2), '', '', ''],
  ];
}

function peerRows(results: PeerResults, n: number): string[][] {
  const rate = (ms: number[]): number => median(ms.map((m) => (n * 1000) / m));
  const cell = (v: number): string => `${whole.format(v)}/s`;
  const puts = PEERS.map((p) => rate(results[p].put));
  const rows: string[][] = [
    [`acknowledged puts, ${PUTS_IN_FLIGHT} in flight`, ...puts.map(cell), ...ratios(puts), '', ''],
  ];
  for (const c of CONSUMERS) {
    const rates = PEERS.map((p) => rate(results[p].consume[c] ?? []));
    const [kv = 0, , cu = 0, kz = 0] = rates;
    const pass = kv >= CURATOR_TARGET * cu && kv >= KAZOO_TARGET * kz;
    rows.push([
      `consume, ${c} consumer${c === 1 ? '' : 's'} (get + ack)`,
      ...rates.map(cell),
      ...ratios(rates),
      `≥ ×${CURATOR_TARGET} Curator, ≥ ×${KAZOO_TARGET} kazoo`,
      verdict(pass),
    ]);
  }
  return rows;
}

function ratios([kv = 0, , cu = 0, kz = 0]: number[]): string[] {
  return [`×${(kv / cu).toFixed(2)}`, `×${(kv / kz).toFixed(2)}`];
}

// --- main ------------------------------------------------------------------

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      store: { type: 'string' },
      backlog: { type: 'string', default: '100000' },
      quick: { type: 'boolean', default: false },
      'no-write': { type: 'boolean', default: false },
      'peers-only': { type: 'boolean', default: false },
      // Passed to bench/run.ts (which then writes nothing): the full standard sizes take long on ZooKeeper.
      only: { type: 'string' },
    },
  });
  const machine = describeMachine();
  ensurePackages();
  const sizes = values.quick ? QUICK : FULL;
  const temp = mkdtempSync(join(tmpdir(), 'kvmq-zk-bench-'));
  const given = values.store ?? process.env.KVMQ_TEST_ZOOKEEPER_URL;
  // A server of our own gets the heap a deep backlog needs (about 7 znodes, some 3 KB, per pending message).
  const heap = Number(values.backlog.replaceAll('_', '')) >= 500_000 ? '10g' : '4g';
  const own = given === undefined ? await step('starting ZooKeeper', () => start(join(temp, 'zk'), { heap })) : null;
  try {
    const hosts = (own?.url ?? given ?? '').replace(/^zookeeper:\/\//i, '').replace(/\/.*$/, '');
    if (hosts.includes(',')) throw new TypeError('give one ZooKeeper server: the transaction count reads its zxid');
    const port = Number(/:(\d+)$/.exec(hosts)?.[1] ?? 2181);
    const id = `${Date.now().toString(36)}-${process.pid}`;
    const peersRoot = `kvmq-bench-peers-${id}`;
    const peersUrl = await createChroot(hosts, peersRoot);
    const classes = join(temp, 'classes');
    compileCurator(classes);
    const peers: [PeerName, Peer][] = [
      ['kvmq', kvmqPeer(peersUrl, PREFETCH)],
      ['kvmq, prefetch 0', kvmqPeer(peersUrl, 0)],
      ['Curator', curatorPeer(hosts, peersRoot, classes)],
      ['kazoo', kazooPeer(hosts, peersRoot)],
    ];
    const limit: LimitFigures = {
      oneByOne: 0,
      rawPerSec: [],
      rawOpsPerSec: [],
      kvmqPerSec: [],
      transactions: 0,
      writeOps: 0,
      reads: 0,
      readRequests: 0,
      messages: 0,
    };
    const empty = (): PeerResults[PeerName] => ({ put: [], consume: { 1: [], 8: [] } });
    const results: PeerResults = { kvmq: empty(), 'kvmq, prefetch 0': empty(), Curator: empty(), kazoo: empty() };
    await step('warm-up', async () => {
      for (const [, peer] of peers) await peer(Math.ceil(sizes.peerN / 10), 8);
    });
    limit.oneByOne = await step(`transactions per message, ${ONE_BY_ONE} one at a time`, () =>
      transactionsOneByOne(peersUrl, port, ONE_BY_ONE),
    );
    for (let round = 0; round < sizes.runs; round++) {
      await step(`raw creates and kvmq lifecycle, round ${round + 1}`, () =>
        measureLimit(peersUrl, port, sizes, limit),
      );
      for (const c of CONSUMERS) {
        for (const [name, peer] of peers) {
          const figure = await step(`${name}, ${c} consumer(s), round ${round + 1}`, () => peer(sizes.peerN, c));
          results[name].put.push(figure.putMs);
          results[name].consume[c]?.push(figure.consumeMs);
        }
      }
    }
    const limitHeader = ['measurement', 'figure', 'detail', 'target', 'result'];
    const limitBody = limitRows(limit);
    const peerHeader = ['measurement', ...PEERS, 'kvmq/Curator', 'kvmq/kazoo', 'target', 'result'];
    const peerBody = peerRows(results, sizes.peerN);
    const failed = [...limitBody, ...peerBody].filter((r) => r.at(-1) === 'FAIL').map((r) => r[0]);
    const outcome = failed.length === 0 ? 'all targets PASS' : `FAIL: ${failed.join('; ')}`;
    const setup =
      `ZooKeeper 3.8 (Debian) standalone at ${hosts}${own === null ? '' : ` (started by the bench, heap ${heap})`}; ` +
      `${sizes.runs} round(s), median; physical limit: ${RAW_FACTOR * sizes.limitN} raw creates (one per transaction; ` +
      `${2 * RAW_FACTOR * sizes.limitN} in multis) and ${sizes.limitN} lifecycle msgs per round; peers: ${sizes.peerN} msgs per measurement`;
    console.log(`kvmq vs Curator vs kazoo on ZooKeeper${values.quick ? ', quick' : ''}\n${machine}\n${setup}\n`);
    console.log(table(limitHeader, limitBody, false));
    console.log('');
    console.log(table(peerHeader, peerBody, false));
    console.log(`\n${outcome}`);
    if (!values['no-write'] && !values.quick) {
      const command = `node --import tsx bench/zookeeper/run.ts ${process.argv.slice(2).join(' ')}`.trim();
      writeSection(
        join(ROOT, 'docs/benchmarks.md'),
        'zookeeper-peers',
        peersSection(
          command,
          machine,
          setup,
          table(limitHeader, limitBody, true),
          table(peerHeader, peerBody, true),
          outcome,
        ),
      );
      console.log('wrote the zookeeper-peers section of docs/benchmarks.md');
    }
    if (!values['peers-only'])
      await standardBench(hosts, id, values.backlog, values.quick, values['no-write'], values.only);
  } finally {
    await own?.stop();
    rmSync(temp, { recursive: true, force: true });
  }
}

/** bench/run.ts on a fresh chroot of the same server: enqueue, raw, lifecycle, latency, backlog. */
async function standardBench(
  hosts: string,
  id: string,
  backlog: string,
  quick: boolean,
  noWrite: boolean,
  only: string | undefined,
): Promise<void> {
  const url = await createChroot(hosts, `kvmq-bench-${id}`);
  const args = ['--import', 'tsx', join(ROOT, 'bench/run.ts'), '--store', url, '--backlog', backlog];
  if (quick) args.push('--quick');
  if (noWrite) args.push('--no-write');
  if (only !== undefined) args.push('--only', only);
  const child = spawn(process.execPath, args, { stdio: 'inherit', cwd: ROOT });
  const code = await new Promise<number>((resolve) => child.once('exit', (c) => resolve(c ?? 1)));
  if (code !== 0) throw new Error(`bench/run.ts exited with ${code}`);
}

function peersSection(
  command: string,
  machine: string,
  setup: string,
  limitTable: string,
  peerTable: string,
  outcome: string,
): string {
  const when = new Date().toISOString().replace('T', ' ').slice(0, 16);
  return `## zookeeper: the physical limit, and kvmq, Curator and kazoo side by side

- Date: ${when} UTC
- Command: \`${command}\` (bench/zookeeper/run.ts; it then runs the standard bench for the \`zookeeper\` section)
- Machine: ${machine}. Shared and noisy: the ratios measured in one run matter more than the rates.
- Setup: ${setup}.
- The physical limit: ZooKeeper commits every write as one transaction (a multi is one), so a queue on it can
  go no faster than the server's transaction rate divided by the transactions a message takes. The raw rate is
  \`bench/raw/zookeeper.ts\` (node-zookeeper-client, one small create per transaction, 64 in flight), measured
  in the same round as kvmq's full lifecycle (producer batches of 1000, one worker at concurrency
  ${LIFECYCLE_CONCURRENCY} with default options, until all are finished). The server counts the transactions
  (its zxid delta) over ${ONE_BY_ONE} messages sent one at a time, each enqueued once the last was finished: an
  enqueue, a claim and a finish, a multi each. Under load kvmq puts many messages in one multi (a batch of
  enqueues; a worker's finishes with the claims of its next messages), so the lifecycle spends far less than one
  transaction per message (the row after the fraction). The rows after that count operations instead (each
  one of a multi, as kvmq sent them) against the server's rate for creates in multis of 1000: a bound batching
  does not move.
- Peers: kazoo 2.8 \`LockingQueue\` (\`bench/zookeeper/kazoo_queue.py\`, each producer and consumer a thread with
  its own session, get then consume) and Curator 5.4 \`DistributedQueue\` with a lock path, its lock-safe mode
  (\`bench/zookeeper/CuratorQueue.java\`, a consumer executor of 1 or 8 threads; puts timed until \`flushPuts\`
  says ZooKeeper acknowledged every one). kvmq: \`enqueue\` with ${PUTS_IN_FLIGHT} in flight; one worker at
  concurrency 1 or 8 with \`prefetch: ${PREFETCH}\` (it claims up to ${PREFETCH} messages ahead of its free slots,
  so the next handler starts while earlier finishes are on their way and finishes travel together; handlers
  still run one or eight at a time), until its graceful stop; and the same with \`prefetch: 0\`, the default,
  where a slot frees only once its finish is acknowledged. Each consumes a queue filled just before, of the
  same size.

${limitTable}

${peerTable}

Targets (issue 3): kvmq ≥ ${LIMIT_FRACTION_TARGET} of the physical limit; kvmq's consume rate ≥ ×${CURATOR_TARGET}
Curator's and ≥ ×${KAZOO_TARGET} kazoo's with one and with eight consumers: ${outcome}.
`;
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
