/**
 * `npm run bench -- [--store URL] [--backlog N] [--quick] [--no-write] [--only m1,m2]`
 *
 * Runs every measurement against one store, prints a table (progress goes to
 * stderr) and rewrites the store kind's section of docs/benchmarks.md. Speed
 * is reported, never enforced: a missed target is a FAIL row, not an exit code.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { connect } from '../src/index.js';
import { measureBacklog } from './backlog.js';
import { describeMachine, rssMb, short, type BenchContext, type BenchSizes } from './common.js';
import { writeSection } from './doc.js';
import { measureEnqueue } from './enqueue.js';
import { measureLatency } from './latency.js';
import { measureLifecycle } from './lifecycle.js';
import { loadRawBench } from './raw/index.js';
import { buildRows, failures, markdownTable, textTable, type BenchFigures } from './report.js';
import { TARGETS } from './targets.js';
import { storeOf } from '../src/client/client-store.js';

const FULL: BenchSizes = {
  enqueueSingle: 20_000,
  enqueueBatched: 200_000,
  batchSize: 1000,
  lifecycle1: 10_000,
  lifecycle64: 100_000,
  latencyMessages: 2000,
  latencyPerSec: 500,
  backlogSmall: 10_000,
  backlogLarge: 1_000_000,
  backlogProbe: 10_000,
  warmFraction: 0.1,
  runs: 3,
};

// Small enough for a smoke run in tests and CI; the figures mean little.
const QUICK: BenchSizes = {
  enqueueSingle: 1000,
  enqueueBatched: 10_000,
  batchSize: 1000,
  lifecycle1: 500,
  lifecycle64: 5000,
  latencyMessages: 200,
  latencyPerSec: 500,
  backlogSmall: 1000,
  backlogLarge: 20_000,
  backlogProbe: 1000,
  warmFraction: 0.2,
  runs: 1,
};

const MEASUREMENTS = ['enqueue', 'raw', 'lifecycle', 'latency', 'backlog'] as const;
type Measurement = (typeof MEASUREMENTS)[number];

const USAGE = `usage: npm run bench -- [options]
  --store URL    store to measure (default: a fresh sqlite: file in a temp dir)
  --backlog N    the large backlog (default ${FULL.backlogLarge}; ${QUICK.backlogLarge} with --quick)
  --latency-rate N
                 messages per second in the latency run (default ${FULL.latencyPerSec}): light load, well
                 under what one worker at concurrency 1 takes on the store
  --quick        small sizes everywhere: a smoke run
  --no-write     do not rewrite docs/benchmarks.md
  --only LIST    run only these of ${MEASUREMENTS.join(',')} (implies --no-write)`;

interface Args {
  readonly url: string | undefined;
  readonly sizes: BenchSizes;
  readonly quick: boolean;
  readonly write: boolean;
  readonly only: ReadonlySet<Measurement>;
}

function parse(argv: string[]): Args {
  const { values } = parseArgs({
    args: argv,
    options: {
      store: { type: 'string' },
      backlog: { type: 'string' },
      'latency-rate': { type: 'string' },
      quick: { type: 'boolean', default: false },
      'no-write': { type: 'boolean', default: false },
      only: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const base = values.quick ? QUICK : FULL;
  const backlog = values.backlog === undefined ? base.backlogLarge : Number(values.backlog.replaceAll('_', ''));
  if (!Number.isInteger(backlog) || backlog <= base.backlogSmall) {
    throw new TypeError(`--backlog must be a whole number above the small backlog (${base.backlogSmall})`);
  }
  const latencyPerSec = Number(values['latency-rate'] ?? base.latencyPerSec);
  if (!Number.isInteger(latencyPerSec) || latencyPerSec < 1) {
    throw new TypeError('--latency-rate must be a whole number of messages per second, 1 or more');
  }
  const only = values.only === undefined ? MEASUREMENTS : values.only.split(',').map((m) => m.trim());
  for (const m of only) {
    if (!(MEASUREMENTS as readonly string[]).includes(m)) {
      throw new TypeError(`--only: unknown measurement '${m}'; known: ${MEASUREMENTS.join(', ')}`);
    }
  }
  return {
    url: values.store,
    sizes: { ...base, backlogLarge: backlog, latencyPerSec },
    quick: values.quick,
    write: !values['no-write'] && values.only === undefined,
    only: new Set(only as Measurement[]),
  };
}

/** Runs one measurement if selected, with its wall time on stderr; one that stalls ends the process. */
async function step<T>(args: Args, name: Measurement, label: string, run: () => Promise<T>): Promise<T | undefined> {
  if (!args.only.has(name)) return undefined;
  process.stderr.write(`bench: ${label} … `);
  const start = performance.now();
  // A lost message would leave a measurement waiting forever; a stuck CI job helps no one.
  const limitMs = args.quick ? 60_000 : 600_000;
  const stall = setTimeout(() => {
    console.error(`\nbench: ${label} made no end in ${limitMs / 1000} s; giving up`);
    process.exit(1);
  }, limitMs);
  try {
    return await run();
  } finally {
    clearTimeout(stall);
    process.stderr.write(`${((performance.now() - start) / 1000).toFixed(1)} s\n`);
  }
}

async function main(): Promise<void> {
  const args = parse(process.argv.slice(2));
  // Taken before the run adds its own load: how busy the shared machine already was.
  const machine = describeMachine();
  const tempDir = args.url === undefined ? mkdtempSync(join(tmpdir(), 'kvmq-bench-')) : null;
  try {
    const url = args.url ?? `sqlite:${join(tempDir ?? '', 'bench.db')}`;
    const { kind, figures } = await measureAll(args, url, tempDir === null);
    report(args, { kind, url, tempStore: tempDir !== null, machine }, figures);
  } finally {
    if (tempDir !== null) rmSync(tempDir, { recursive: true, force: true });
  }
}

/** Every selected measurement, in an order that keeps the raw baseline beside kvmq's enqueue and the big backlog last. */
async function measureAll(
  args: Args,
  url: string,
  clearAfter: boolean,
): Promise<{ kind: string; figures: BenchFigures }> {
  const runId = Date.now().toString(36);
  const queues = new Set<string>();
  const client = await connect(url);
  const ctx: BenchContext = {
    client,
    sizes: args.sizes,
    queue: (label) => {
      const name = `bench-${runId}-${label}`;
      queues.add(name);
      return name;
    },
  };
  const kind = storeOf(client).kind;
  const figures: BenchFigures = { rssStartMb: rssMb() };
  const s = args.sizes;
  try {
    figures.enqueue = await step(args, 'enqueue', 'enqueue', () => measureEnqueue(ctx));
    figures.raw = await step(args, 'raw', `raw ${kind}`, async () => {
      const raw = await loadRawBench(kind);
      return raw === null ? null : raw.measureRaw(url, s);
    });
    figures.lifecycle1 = await step(args, 'lifecycle', 'lifecycle c=1', () => measureLifecycle(ctx, 1, s.lifecycle1));
    figures.lifecycle64 = await step(args, 'lifecycle', 'lifecycle c=64', () =>
      measureLifecycle(ctx, 64, s.lifecycle64),
    );
    figures.latency = await step(args, 'latency', 'latency', () => measureLatency(ctx));
    const backlogLabel = `backlog ${short(s.backlogSmall)} and ${short(s.backlogLarge)}`;
    figures.backlog = await step(args, 'backlog', backlogLabel, () => measureBacklog(ctx));
    // A store the user named keeps nothing of the run (a temp one is deleted whole).
    if (clearAfter) await client.clear(...queues);
  } finally {
    await client.close();
  }
  return { kind, figures };
}

interface RunInfo {
  readonly kind: string;
  readonly url: string;
  readonly tempStore: boolean;
  readonly machine: string;
}

/** Prints the table and the verdict, and rewrites the store kind's section of docs/benchmarks.md. */
function report(args: Args, run: RunInfo, figures: BenchFigures): void {
  const targets = TARGETS[run.kind];
  const rows = buildRows(run.kind, figures, args.sizes, targets);
  const failed = failures(rows);
  const verdict =
    targets === undefined
      ? 'no targets for this store kind'
      : failed.length === 0
        ? 'all targets PASS'
        : `FAIL: ${failed.join('; ')}`;
  const verdictNote =
    args.quick && targets !== undefined ? `${verdict} (quick run: too small to judge targets by)` : verdict;
  console.log(`kvmq bench — store ${run.kind} (${run.url})${args.quick ? ', quick' : ''}\n${run.machine}\n`);
  console.log(textTable(rows));
  console.log(`\n${verdictNote}`);
  if (figures.raw === null) console.log(`no raw baseline for ${run.kind}: add bench/raw/${run.kind}.ts`);
  if (!args.write) return;
  const command = ['npm run bench', ...(process.argv.length > 2 ? ['--', ...process.argv.slice(2)] : [])].join(' ');
  const path = fileURLToPath(new URL('../docs/benchmarks.md', import.meta.url));
  writeSection(path, run.kind, docSection(run, command, markdownTable(rows), verdictNote, args.quick));
  console.log(`wrote the ${run.kind} section of docs/benchmarks.md`);
}

function docSection(run: RunInfo, command: string, table: string, verdict: string, quick: boolean): string {
  const when = new Date().toISOString().replace('T', ' ').slice(0, 16);
  const store = run.tempStore ? ` (store: a fresh \`${run.kind}:\` file in a temp dir)` : '';
  return `## ${run.kind}

- Date: ${when} UTC
- Command: \`${command}\`${store}
- Machine: ${run.machine}
- Shared and noisy: the side-by-side ratios (kvmq/raw, large/small backlog) matter more than the absolute figures.${quick ? '\n- **Quick smoke run**: sizes too small for these figures to mean much.' : ''}

${table}

Result: ${verdict}.
`;
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
