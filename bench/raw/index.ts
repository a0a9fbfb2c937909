/**
 * The raw store's own write rate, the baseline kvmq's enqueue is compared
 * with. One file per store kind (`raw/<kind>.ts`), loaded by the kind of the
 * store the URL opened, so a new store adds a file and nothing else.
 */
import { existsSync } from 'node:fs';
import type { BenchSizes, Rate } from '../common.js';

export interface RawFigures {
  /** One small row (key, node, put) per write, one write after another. */
  readonly single: Rate;
  /** Rows written `batchSize` per transaction (or multi, Txn, pipeline). */
  readonly batched: Rate;
  /** What was measured, for the report, e.g. "better-sqlite3, WAL, synchronous=NORMAL". */
  readonly setup: string;
}

/** What each `raw/<kind>.ts` exports. */
export interface RawBench {
  measureRaw(url: string, sizes: BenchSizes): Promise<RawFigures>;
}

/** The raw bench for a store kind, or null when there is none yet. */
export async function loadRawBench(kind: string): Promise<RawBench | null> {
  if (!/^[a-z0-9]+$/.test(kind) || !existsSync(new URL(`./${kind}.ts`, import.meta.url))) return null;
  return (await import(`./${kind}.js`)) as RawBench;
}
