/**
 * Enqueue-to-handler latency under light load: messages at a steady rate to
 * one worker that goes idle between them, so each one is a wake-up. The
 * payload carries performance.now() from just before enqueue; the handler
 * subtracts it (same process, same clock).
 */
import { quantile, signal, sleepUntil, warmSize, type BenchContext } from './common.js';

export interface LatencyFigures {
  readonly n: number;
  readonly perSec: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

export async function measureLatency(ctx: BenchContext): Promise<LatencyFigures> {
  const { sizes } = ctx;
  await run(ctx, ctx.queue('latency-warm'), warmSize(sizes.latencyMessages, sizes));
  const samples = await run(ctx, ctx.queue('latency'), sizes.latencyMessages);
  const sorted = samples.sort((a, b) => a - b);
  return {
    n: sorted.length,
    perSec: sizes.latencyPerSec,
    p50Ms: quantile(sorted, 0.5),
    p99Ms: quantile(sorted, 0.99),
    maxMs: quantile(sorted, 1),
  };
}

async function run({ client, sizes }: BenchContext, queue: string, n: number): Promise<number[]> {
  const samples: number[] = [];
  const allHandled = signal();
  const idle = signal();
  const worker = client.worker(
    queue,
    (job) => {
      samples.push(performance.now() - (job.payload as { t: number }).t);
      if (samples.length === n) allHandled.fire();
    },
    // A poll that claims nothing means the worker has gone idle and waits for a wake-up.
    {
      monitor: (info) => {
        if (info.claimed.length === 0) idle.fire();
      },
    },
  );
  await idle.promise;
  const gapMs = 1000 / sizes.latencyPerSec;
  const start = performance.now();
  for (let i = 0; i < n; i++) {
    // On a schedule, not after a fixed sleep, so a slow enqueue does not lower the rate.
    await sleepUntil(start + i * gapMs);
    await client.enqueue(queue, { t: performance.now() });
  }
  await allHandled.promise;
  await worker.stop();
  return samples;
}
