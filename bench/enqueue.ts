/** Enqueue throughput: single calls with many in flight, and enqueueBatch. */
import { fill, inFlight, repeat, timed, warmSize, type BenchContext, type Rate } from './common.js';

// Single enqueues in flight at once, as a busy producer would have.
export const SINGLE_IN_FLIGHT = 64;

export interface EnqueueFigures {
  readonly single: Rate;
  readonly batched: Rate;
}

export async function measureEnqueue(ctx: BenchContext): Promise<EnqueueFigures> {
  const { sizes } = ctx;
  const n1 = sizes.enqueueSingle;
  await single(ctx, ctx.queue('enqueue-single-warm'), warmSize(n1, sizes));
  const singleRate = await repeat(sizes.runs, n1, (run) => single(ctx, ctx.queue(`enqueue-single-${run}`), n1));
  const nb = sizes.enqueueBatched;
  await batched(ctx, ctx.queue('enqueue-batched-warm'), warmSize(nb, sizes));
  const batchedRate = await repeat(sizes.runs, nb, (run) => batched(ctx, ctx.queue(`enqueue-batched-${run}`), nb));
  return { single: singleRate, batched: batchedRate };
}

export function single({ client }: BenchContext, queue: string, n: number): Promise<number> {
  return timed(() => inFlight(n, SINGLE_IN_FLIGHT, (i) => client.enqueue(queue, { i })));
}

export function batched({ client, sizes }: BenchContext, queue: string, n: number): Promise<number> {
  return timed(() => fill(client, queue, n, sizes.batchSize));
}
