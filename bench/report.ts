/** Turns the figures into rows (figure, comparison, target, PASS/FAIL), printed as text or Markdown. */
import { short, whole, type BenchSizes, type Rate } from './common.js';
import { SINGLE_IN_FLIGHT } from './enqueue.js';
import { DRAIN_CONCURRENCY, type BacklogFigures } from './backlog.js';
import type { EnqueueFigures } from './enqueue.js';
import type { LatencyFigures } from './latency.js';
import type { LifecycleFigure } from './lifecycle.js';
import type { RawFigures } from './raw/index.js';
import type { Targets } from './targets.js';

/** Everything one run measured; a measurement left out with --only is absent. */
export interface BenchFigures {
  /** Process RSS once connected, before any measurement: the floor the backlog RSS rows start from. */
  rssStartMb?: number;
  enqueue?: EnqueueFigures;
  /** Null: no raw bench exists for this store kind. */
  raw?: RawFigures | null;
  lifecycle1?: LifecycleFigure;
  lifecycle64?: LifecycleFigure;
  latency?: LatencyFigures;
  backlog?: BacklogFigures;
}

export interface Row {
  readonly measurement: string;
  readonly figure: string;
  readonly compare: string;
  readonly target: string;
  readonly result: 'PASS' | 'FAIL' | '';
}

const HEADERS: Record<keyof Row, string> = {
  measurement: 'measurement',
  figure: 'figure',
  compare: 'compared',
  target: 'target',
  result: 'result',
};
const COLUMNS = ['measurement', 'figure', 'compare', 'target', 'result'] as const;

/** A target's text and whether the figure met it; undefined when the store kind has no targets. */
type Check = { readonly text: string; readonly pass: boolean } | undefined;

export function buildRows(kind: string, f: BenchFigures, sizes: BenchSizes, t: Targets | undefined): Row[] {
  const rows: Row[] = [];
  const raw = f.raw ?? null;
  if (f.enqueue !== undefined) {
    const { single, batched } = f.enqueue;
    const vsSingle = join(versusRaw(single.perSec, raw?.single.perSec), spread(single));
    const vsBatched = join(versusRaw(batched.perSec, raw?.batched.perSec), spread(batched));
    const batchedCheck = t && atLeast(batched.perSec, t.batchedEnqueuePerSec, perSec);
    rows.push(row(`enqueue single (${SINGLE_IN_FLIGHT} in flight)`, perSec(single.perSec), vsSingle));
    rows.push(row(`enqueue batched (${sizes.batchSize}/call)`, perSec(batched.perSec), vsBatched, batchedCheck));
  }
  if (raw !== null) {
    const { single, batched, setup } = raw;
    rows.push(row(`raw ${kind} single (1 row/txn)`, perSec(single.perSec, 'rows/s'), join(setup, spread(single))));
    const batchedLabel = `raw ${kind} batched (${sizes.batchSize} rows/txn)`;
    rows.push(row(batchedLabel, perSec(batched.perSec, 'rows/s'), join(setup, spread(batched))));
  }
  for (const l of [f.lifecycle1, f.lifecycle64]) {
    if (l === undefined) continue;
    const check = t && l.concurrency === 64 ? atLeast(l.perSec, t.lifecycle64PerSec, perSec) : undefined;
    const about = join(`${l.n} msgs, no-op handler`, spread(l));
    rows.push(row(`lifecycle, concurrency ${l.concurrency}`, perSec(l.perSec), about, check));
  }
  if (f.latency !== undefined) {
    const l = f.latency;
    const check = t && atMost(l.p50Ms, t.latencyP50Ms, (v) => `${v} ms`);
    rows.push(row('latency p50 (enqueue → handler)', ms(l.p50Ms), `${l.n} msgs at ${l.perSec}/s`, check));
    rows.push(row('latency p99 (enqueue → handler)', ms(l.p99Ms), `max ${ms(l.maxMs)}`));
  }
  if (f.rssStartMb !== undefined) rows.push(row('RSS at start', mb(f.rssStartMb), 'after connect, before measuring'));
  if (f.backlog !== undefined) rows.push(...backlogRows(f.backlog, sizes, t));
  return rows;
}

function backlogRows({ small, large }: BacklogFigures, sizes: BenchSizes, t: Targets | undefined): Row[] {
  const [s, l] = [short(small.backlog), short(large.backlog)];
  const probe = short(sizes.backlogProbe);
  const ratio = (a: number, b: number): string => `${l}/${s} ×${(b / a).toFixed(2)}`;
  const costCheck = (a: number, b: number): Check =>
    t && { text: `${l}/${s} ≤ ×${t.backlogCostRatio}`, pass: b / a <= t.backlogCostRatio };
  const rssCheck = (value: number): Check => t && { text: `< ${t.rssMb} MB`, pass: value < t.rssMb };
  const enqueue = [small.enqueueUsPerMsg, large.enqueueUsPerMsg] as const;
  const claim = [small.claimUsPerMsg, large.claimUsPerMsg] as const;
  return [
    row(`backlog build to ${s}`, perSec(small.build.perSec), 'enqueueBatch'),
    row(`backlog build to ${l}`, perSec(large.build.perSec), 'enqueueBatch'),
    row(`backlog enqueue cost @${s}`, us(enqueue[0]), `${probe} more, batched`),
    row(`backlog enqueue cost @${l}`, us(enqueue[1]), ratio(...enqueue), costCheck(...enqueue)),
    row(`backlog claim cost @${s}`, us(claim[0]), `drain ${probe}, concurrency ${DRAIN_CONCURRENCY}`),
    row(`backlog claim cost @${l}`, us(claim[1]), ratio(...claim), costCheck(...claim)),
    row(`backlog RSS @${s}`, mb(small.rssMb), `JS heap used ${mb(small.heapUsedMb)}`, rssCheck(small.rssMb)),
    row(
      `backlog RSS @${l}`,
      mb(large.rssMb),
      join(ratio(small.rssMb, large.rssMb), `JS heap used ${mb(large.heapUsedMb)}`),
      rssCheck(large.rssMb),
    ),
  ];
}

function atLeast(value: number, min: number, format: (n: number) => string): Check {
  return { text: `≥ ${format(min)}`, pass: value >= min };
}

function atMost(value: number, max: number, format: (n: number) => string): Check {
  return { text: `≤ ${format(max)}`, pass: value <= max };
}

function row(measurement: string, figure: string, compare = '', check?: Check): Row {
  return {
    measurement,
    figure,
    compare,
    target: check?.text ?? '',
    result: check === undefined ? '' : check.pass ? 'PASS' : 'FAIL',
  };
}

/** The runs behind a median, slowest to fastest, so the noise shows beside the figure. */
function spread(r: Rate): string {
  return r.runs > 1 ? `median of ${r.runs}: ${compact.format(r.lowPerSec)}–${compact.format(r.highPerSec)}` : '';
}

function join(...parts: string[]): string {
  return parts.filter((p) => p !== '').join('; ');
}

function versusRaw(kvmq: number, raw: number | undefined): string {
  return raw === undefined ? '' : `kvmq/raw ${(kvmq / raw).toFixed(2)} (raw ${perSec(raw, 'rows/s')})`;
}

const compact = new Intl.NumberFormat('en-US', { notation: 'compact', maximumFractionDigits: 1 });
const perSec = (n: number, unit = 'msgs/s'): string => `${whole.format(n)} ${unit}`;
const ms = (n: number): string => `${n.toFixed(n < 10 ? 2 : 1)} ms`;
const us = (n: number): string => `${n.toFixed(1)} µs/msg`;
const mb = (n: number): string => `${n.toFixed(0)} MB`;

export function textTable(rows: readonly Row[]): string {
  const all = [HEADERS, ...rows];
  const widths = COLUMNS.map((c) => Math.max(...all.map((r) => r[c].length)));
  return all
    .map((r) =>
      COLUMNS.map((c, i) => r[c].padEnd(widths[i] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

export function markdownTable(rows: readonly Row[]): string {
  const line = (cells: readonly string[]): string => `| ${cells.join(' | ')} |`;
  return [
    line(COLUMNS.map((c) => HEADERS[c])),
    line(COLUMNS.map(() => '---')),
    ...rows.map((r) => line(COLUMNS.map((c) => r[c]))),
  ].join('\n');
}

/** The targets that failed, by measurement, for the summary line. */
export function failures(rows: readonly Row[]): string[] {
  return rows.filter((r) => r.result === 'FAIL').map((r) => r.measurement);
}
