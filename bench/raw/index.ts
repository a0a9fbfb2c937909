/**
 * The raw store's own write rate, the baseline kvmq's enqueue is compared
 * with. One file per store kind (`raw/<kind>.ts`), loaded by the kind of the
 * store the URL opened, so a new store adds a file and nothing else.
 */
import { existsSync } from 'node:fs';
import { rate, warmSize, type BenchSizes, type Rate } from '../common.js';

export interface RawFigures {
  /** One small row (key, node, put) per write, one write after another. */
  readonly single: Rate;
  /** Rows written `batchSize` per transaction (or multi, Txn, pipeline). */
  readonly batched: Rate;
  /** What was measured, for the report, e.g. "better-sqlite3, WAL, synchronous=NORMAL". */
  readonly setup: string;
}

/** The value every raw write stores: about the size of a small message's payload. */
export const RAW_PAYLOAD = Buffer.from('{"i":12345}');

/** Fresh keys for one run's rows: `raw-` and a counter, padded to an id's length. */
export function rawIds(): () => string {
  let next = 0;
  return () => `raw-${String(next++).padStart(32, '0')}`;
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

/**
 * Times a kind's two write loops, each after a warm-up run of its own: `single(n)` writes n rows one per write,
 * `batched(n)` writes n rows `batchSize` per transaction.
 */
export async function timeWrites(
  sizes: BenchSizes,
  single: (n: number) => Promise<unknown>,
  batched: (n: number) => Promise<unknown>,
): Promise<Pick<RawFigures, 'single' | 'batched'>> {
  const timed = async (write: (n: number) => Promise<unknown>, n: number): Promise<Rate> => {
    await write(warmSize(n, sizes));
    const start = performance.now();
    await write(n);
    return rate(n, performance.now() - start);
  };
  const singleRate = await timed(single, sizes.enqueueSingle);
  return { single: singleRate, batched: await timed(batched, sizes.enqueueBatched) };
}
