/** Small helpers shared by the measurements: timing, concurrency, sizes. */
import { cpus, loadavg, release, totalmem } from 'node:os';
import type { Client } from '../src/index.js';
import type { Finish } from '../src/stores/contract/contract.js';

/** How many messages each measurement uses; `--quick` shrinks them all. */
export interface BenchSizes {
  readonly enqueueSingle: number;
  readonly enqueueBatched: number;
  /** kvmq's batched figures and the raw store's batched writes use the same batch size. */
  readonly batchSize: number;
  readonly lifecycle1: number;
  readonly lifecycle64: number;
  readonly latencyMessages: number;
  readonly latencyPerSec: number;
  readonly backlogSmall: number;
  readonly backlogLarge: number;
  /** The timed enqueue and the timed drain on top of each backlog. */
  readonly backlogProbe: number;
  /** Warm-ups use this fraction of a measurement's size. */
  readonly warmFraction: number;
  /** Timed runs of each throughput measurement; the median counts, the spread shows the noise. */
  readonly runs: number;
}

/** What every measurement gets: the client, the sizes, and fresh queue names. */
export interface BenchContext {
  readonly client: Client;
  readonly sizes: BenchSizes;
  /** A queue name no earlier run or measurement used. */
  readonly queue: (label: string) => string;
}

/** A throughput figure: n items in ms milliseconds (the median run), and the slowest and fastest runs. */
export interface Rate {
  readonly n: number;
  readonly ms: number;
  readonly perSec: number;
  readonly runs: number;
  readonly lowPerSec: number;
  readonly highPerSec: number;
}

export function rate(n: number, ms: number): Rate {
  const perSec = ms > 0 ? (n * 1000) / ms : Infinity;
  return { n, ms, perSec, runs: 1, lowPerSec: perSec, highPerSec: perSec };
}

/** Times `once` (n items per run) `runs` times and keeps the median run. */
export async function repeat(runs: number, n: number, once: (run: number) => Promise<number>): Promise<Rate> {
  const times: number[] = [];
  for (let run = 0; run < runs; run++) times.push(await once(run));
  const sorted = times.sort((a, b) => a - b);
  const at = (q: number): number => rate(n, quantile(sorted, q)).perSec;
  return { ...rate(n, quantile(sorted, 0.5)), runs, lowPerSec: at(1), highPerSec: at(0) };
}

/** Times an async task with the monotonic clock. */
export async function timed(task: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await task();
  return performance.now() - start;
}

/** Median and slowest of `runs` timed calls, after one untimed warm-up. */
export async function sampleMs(runs: number, call: () => Promise<void>): Promise<[median: number, max: number]> {
  await call();
  const times: number[] = [];
  for (let i = 0; i < runs; i++) times.push(await timed(call));
  times.sort((a, b) => a - b);
  return [quantile(times, 0.5), times[times.length - 1] ?? 0];
}

/** Runs task(0..n-1) with at most `width` calls in flight. */
export async function inFlight(n: number, width: number, task: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  async function lane(): Promise<void> {
    while (next < n) await task(next++);
  }
  await Promise.all(Array.from({ length: Math.min(width, n) }, lane));
}

/** Enqueues n small messages with enqueueBatch, batchSize per call, one call after another. */
export async function fill(client: Client, queue: string, n: number, batchSize: number): Promise<void> {
  for (let sent = 0; sent < n; sent += batchSize) {
    const size = Math.min(batchSize, n - sent);
    await client.enqueueBatch(
      queue,
      Array.from({ length: size }, (_, i) => ({ payload: { i: sent + i } })),
    );
  }
}

/** A promise plus the function that settles it, for "the n-th handler call happened". */
export function signal(): { promise: Promise<void>; fire: () => void } {
  let fire = (): void => undefined;
  const promise = new Promise<void>((resolve) => (fire = resolve));
  return { promise, fire };
}

export function warmSize(n: number, sizes: BenchSizes): number {
  return Math.max(1, Math.round(n * sizes.warmFraction));
}

/** The value at quantile q (0..1) of ascending samples, nearest rank. */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank] ?? NaN;
}

/** The median of unsorted samples. */
export function median(values: readonly number[]): number {
  return quantile(
    [...values].sort((a, b) => a - b),
    0.5,
  );
}

/** Whole numbers with thousands separators: 12,345. */
export const whole = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });

/** One decimal: 12.3. */
export const tenths = new Intl.NumberFormat('en-US', { minimumFractionDigits: 1, maximumFractionDigits: 1 });

/** A table with a header row, as aligned text for the terminal or as markdown for docs/benchmarks.md. */
export function table(header: readonly string[], body: readonly string[][], markdown: boolean): string {
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

/** Runs one step of a bench, its label and wall time on stderr. */
export async function step<T>(label: string, task: () => Promise<T>): Promise<T> {
  process.stderr.write(`bench: ${label} … `);
  const begin = performance.now();
  try {
    return await task();
  } finally {
    process.stderr.write(`${((performance.now() - begin) / 1000).toFixed(1)} s\n`);
  }
}

/** Resolves at `at` (performance.now() time), at once if that has passed. */
export function sleepUntil(at: number): Promise<void> {
  const ms = at - performance.now();
  return ms <= 0 ? Promise.resolve() : new Promise((resolve) => setTimeout(resolve, ms));
}

export const MB = 1024 * 1024;

export function rssMb(): number {
  return process.memoryUsage().rss / MB;
}

/** 10000 → "10k", 1000000 → "1M": how backlog sizes appear in labels. */
export function short(n: number): string {
  if (n >= 1_000_000 && n % 100_000 === 0) return `${n / 1_000_000}M`;
  if (n >= 1000 && n % 100 === 0) return `${n / 1000}k`;
  return String(n);
}

/** Sizes for a run of the lifecycle measurement alone: n messages per run, `runs` runs, a tenth to warm up. */
export function lifecycleSizes(n: number, runs: number): BenchSizes {
  return {
    enqueueSingle: 0,
    enqueueBatched: 0,
    batchSize: 1000,
    lifecycle1: n,
    lifecycle64: n,
    latencyMessages: 0,
    latencyPerSec: 0,
    backlogSmall: 0,
    backlogLarge: 0,
    backlogProbe: 0,
    warmFraction: 0.1,
    runs,
  };
}

/** A success for a message a bench took with the store's own claim. */
export function successFinish(m: { readonly id: string; readonly attempt: number }): Finish {
  return { id: m.id, attempt: m.attempt, outcome: 'success', backoffMs: 0, error: null, startedAt: Date.now() };
}

/** The machine a run measured, for the reports: cores, memory, OS, Node, and the load when the run began. */
export function describeMachine(): string {
  const cores = cpus();
  const model = cores[0]?.model.trim() ?? 'unknown CPU';
  const gb = (totalmem() / 1024 ** 3).toFixed(1);
  const load = loadavg()[0]?.toFixed(2) ?? '?';
  return (
    `${cores.length} cores (${model}), ${gb} GB RAM, ${process.platform} ${release()}, Node ${process.version}, ` +
    `load average ${load} at start`
  );
}

/** Queue names no earlier run used (`prefix-<time>-<label>`), and the list of those handed out, to clear. */
export function freshQueues(prefix: string): { readonly queue: (label: string) => string; readonly made: string[] } {
  const made: string[] = [];
  return {
    made,
    queue: (label) => {
      const name = `${prefix}-${Date.now().toString(36)}-${label}`;
      made.push(name);
      return name;
    },
  };
}
