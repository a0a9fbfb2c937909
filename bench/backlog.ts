/**
 * Backlog: does a deep queue make enqueue and claim dearer, or the process
 * bigger? On a queue holding a small and then a large backlog, times an
 * enqueue of `backlogProbe` more messages and a worker draining as many, and
 * reads RSS after each.
 */
import { fill, MB, rate, rssMb, signal, timed, warmSize, type BenchContext, type Rate } from './common.js';

// As in the lifecycle measurement: the worker that drains runs 64 handlers at once.
export const DRAIN_CONCURRENCY = 64;

export interface BacklogPoint {
  readonly backlog: number;
  /** Building the backlog itself, with enqueueBatch. */
  readonly build: Rate;
  readonly enqueueUsPerMsg: number;
  readonly claimUsPerMsg: number;
  readonly rssMb: number;
  /** V8 heap in use at the same moment: how much of the RSS is JavaScript objects. */
  readonly heapUsedMb: number;
}

export interface BacklogFigures {
  readonly small: BacklogPoint;
  readonly large: BacklogPoint;
}

export async function measureBacklog(ctx: BenchContext): Promise<BacklogFigures> {
  // Warm the two timed paths (batched enqueue, a draining worker) on a queue of their own.
  const warm = ctx.queue('backlog-warm');
  const warmN = warmSize(ctx.sizes.backlogProbe, ctx.sizes);
  await fill(ctx.client, warm, warmN, ctx.sizes.batchSize);
  await drain(ctx, warm, warmN);
  const small = await point(ctx, ctx.sizes.backlogSmall);
  const large = await point(ctx, ctx.sizes.backlogLarge);
  return { small, large };
}

async function point(ctx: BenchContext, backlog: number): Promise<BacklogPoint> {
  const { client, sizes } = ctx;
  const queue = ctx.queue(`backlog-${backlog}`);
  const buildMs = await timed(() => fill(client, queue, backlog, sizes.batchSize));
  const enqueueMs = await timed(() => fill(client, queue, sizes.backlogProbe, sizes.batchSize));
  const drained = await drain(ctx, queue, sizes.backlogProbe);
  return {
    backlog,
    build: rate(backlog, buildMs),
    enqueueUsPerMsg: (enqueueMs * 1000) / sizes.backlogProbe,
    claimUsPerMsg: (drained.ms * 1000) / drained.handled,
    rssMb: rssMb(),
    heapUsedMb: process.memoryUsage().heapUsed / MB,
  };
}

/** A worker takes at least n messages; the cost is per message it handled, up to its graceful stop. */
async function drain({ client }: BenchContext, queue: string, n: number): Promise<{ ms: number; handled: number }> {
  let handled = 0;
  const enough = signal();
  const start = performance.now();
  const worker = client.worker(
    queue,
    () => {
      handled += 1;
      if (handled === n) enough.fire();
    },
    { concurrency: DRAIN_CONCURRENCY },
  );
  await enough.promise;
  await worker.stop();
  return { ms: performance.now() - start, handled };
}
