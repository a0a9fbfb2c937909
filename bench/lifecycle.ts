/**
 * Full lifecycle: a producer enqueues N messages (batched) while one worker
 * with a no-op handler takes them; the rate is N over the time until all N
 * are done in the store.
 */
import { fill, repeat, signal, warmSize, type BenchContext, type Rate } from './common.js';

export interface LifecycleFigure extends Rate {
  readonly concurrency: number;
}

export async function measureLifecycle(ctx: BenchContext, concurrency: number, n: number): Promise<LifecycleFigure> {
  const label = `lifecycle-c${concurrency}`;
  await runLifecycle(ctx, ctx.queue(`${label}-warm`), concurrency, warmSize(n, ctx.sizes));
  const figure = await repeat(ctx.sizes.runs, n, (i) => runLifecycle(ctx, ctx.queue(`${label}-${i}`), concurrency, n));
  return { ...figure, concurrency };
}

/** One timed run on `queue`: ms until all n are done in the store. */
export async function runLifecycle(
  { client, sizes }: BenchContext,
  queue: string,
  concurrency: number,
  n: number,
): Promise<number> {
  let handled = 0;
  const allHandled = signal();
  const start = performance.now();
  const worker = client.worker(
    queue,
    () => {
      handled += 1;
      if (handled === n) allHandled.fire();
    },
    { concurrency },
  );
  await fill(client, queue, n, sizes.batchSize);
  await allHandled.promise;
  // A graceful stop resolves once every finish has reached the store: that is "all done".
  await worker.stop();
  const ms = performance.now() - start;
  const { counts } = await client.queueStatus(queue);
  if (counts['done-awaiting-gc'] !== n) {
    throw new Error(`lifecycle c=${concurrency}: ${n} handled but the store counts ${JSON.stringify(counts)}`);
  }
  return ms;
}
