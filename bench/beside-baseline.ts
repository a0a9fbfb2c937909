/**
 * What the benches that set variants side by side in one process share (events.ts, scheduling.ts): their
 * options (`--store URL --rounds N --quick --baseline DIR`), this checkout's client and, with `--baseline DIR`
 * (another checkout of kvmq, e.g. from `git archive`), that checkout's client, fresh queues cleared at the
 * end, and rounds that rotate which variant goes first.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { connect, type Client } from '../src/index.js';
import type { BenchContext, BenchSizes } from './common.js';
import { batched, single } from './enqueue.js';
import { runLifecycle } from './lifecycle.js';

/** A measurement: `run` times `n` messages on `queue` and returns the ms. */
export interface Case {
  readonly label: string;
  readonly n: number;
  readonly run: (ctx: BenchContext, queue: string, n: number) => Promise<number>;
}

/** What both benches measure through the public API: enqueue, single and batched, and the full lifecycle. */
export function clientCases(scale: number): Case[] {
  return [
    { label: 'enqueue, single (64 in flight)', n: 5000 * scale, run: single },
    { label: 'enqueue, batches of 1000', n: 50_000 * scale, run: batched },
    { label: 'lifecycle, concurrency 1', n: 3000 * scale, run: (ctx, q, n) => runLifecycle(ctx, q, 1, n) },
    { label: 'lifecycle, concurrency 64', n: 30_000 * scale, run: (ctx, q, n) => runLifecycle(ctx, q, 64, n) },
  ];
}

export interface BesideBaseline {
  /** 1, or 0.1 with `--quick`: what each case's message count is multiplied by. */
  readonly scale: number;
  readonly rounds: number;
  readonly client: Client;
  /** The `--baseline` checkout's client, on the same store (on the default SQLite, a file of its own). */
  readonly baselineClient: Client | null;
  readonly ctx: BenchContext;
  /** A queue no earlier run used, for a run of `variant`; cleared by close(). */
  freshQueue(variant: string): string;
  close(): Promise<void>;
}

/** Parses the options and connects; `name` marks the temp dir and the queues, `batchSize` the batched runs. */
export async function besideBaseline(name: string, batchSize: number): Promise<BesideBaseline> {
  const { values } = parseArgs({
    options: {
      store: { type: 'string' },
      rounds: { type: 'string' },
      quick: { type: 'boolean' },
      baseline: { type: 'string' },
    },
  });
  const quick = values.quick === true;
  const tempDir = values.store === undefined ? mkdtempSync(join(tmpdir(), `kvmq-bench-${name}-`)) : null;
  const url = values.store ?? `sqlite:${join(tempDir ?? '', 'bench.db')}`;
  const client = await connect(url);
  // The baseline's client speaks the same public API; only connect is needed from it. On the default SQLite
  // store it gets a file of its own (an older kvmq refuses a newer schema).
  type Connect = (url: string) => Promise<Client>;
  const baselineUrl = tempDir === null ? url : `sqlite:${join(tempDir, 'baseline.db')}`;
  const baselineClient =
    values.baseline === undefined
      ? null
      : await ((await import(join(values.baseline, 'src/index.ts'))) as { connect: Connect }).connect(baselineUrl);
  const runId = Date.now().toString(36);
  // Only batchSize is read by the runs these benches measure.
  const sizes = { batchSize } as BenchSizes;
  const ctx: BenchContext = { client, sizes, queue: (label) => `bench-${name}-${runId}-${label}` };
  const queues: string[] = [];
  return {
    scale: quick ? 0.1 : 1,
    rounds: Number(values.rounds ?? (quick ? 1 : 5)),
    client,
    baselineClient,
    ctx,
    freshQueue(variant) {
      const queue = ctx.queue(`${queues.length + 1}-${variant}`);
      queues.push(queue);
      return queue;
    },
    async close() {
      await client.clear(...queues);
      await baselineClient?.close();
      await client.close();
      if (tempDir !== null) rmSync(tempDir, { recursive: true, force: true });
    },
  };
}

/**
 * Runs each variant once as a warm-up, then `rounds` rounds of every variant, rotating which goes first (that
 * spreads the machine's drift over all); returns each variant's results in round order.
 */
export async function rotatingRounds<V, T>(
  variants: readonly V[],
  rounds: number,
  once: (variant: V) => Promise<T>,
): Promise<Map<V, T[]>> {
  for (const variant of variants) await once(variant);
  const results = new Map<V, T[]>(variants.map((v) => [v, []]));
  for (let round = 0; round < rounds; round++) {
    for (let k = 0; k < variants.length; k++) {
      const variant = variants[(round + k) % variants.length] as V;
      results.get(variant)?.push(await once(variant));
    }
  }
  return results;
}
