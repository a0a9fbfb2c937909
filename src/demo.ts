/**
 * `npm run demo`: a tour of kvmq on the store named by $KVMQ_STORE (default
 * sqlite:./kvmq.db). Enqueues 10,000 messages, works them off at concurrency
 * 64, and prints the queue's final counts and the rates.
 */
import { connect, DEFAULT_STORE_URL, MESSAGE_STATES, type BatchItem } from './index.js';
import { formatCount, Progress } from './cli/progress.js';

const QUEUE = 'demo';
const MESSAGES = 10_000;
const BATCH = 1000;
const CONCURRENCY = 64;

async function main(): Promise<number> {
  const url = process.env.KVMQ_STORE || DEFAULT_STORE_URL;
  const client = await connect(url);
  try {
    process.stderr.write(`kvmq demo on ${url}\n`);
    await client.clear(QUEUE);

    const enqueueStart = performance.now();
    const enqueued = new Progress({ label: 'enqueue', total: MESSAGES });
    for (let first = 0; first < MESSAGES; first += BATCH) {
      const batch: BatchItem[] = [];
      for (let n = first; n < Math.min(first + BATCH, MESSAGES); n += 1) batch.push({ payload: { n } });
      await client.enqueueBatch(QUEUE, batch);
      enqueued.update(first + batch.length);
    }
    enqueued.finish();
    const enqueueMs = performance.now() - enqueueStart;

    const workStart = performance.now();
    const worked = new Progress({ label: 'work', total: MESSAGES });
    // Ids, not a counter: a redelivered message (at least once) must not count twice.
    const handled = new Set<string>();
    let allHandled = (): void => undefined;
    const done = new Promise<void>((resolve) => (allHandled = resolve));
    const worker = client.worker(
      QUEUE,
      (job) => {
        // The no-op-ish work: read the payload.
        if (typeof (job.payload as { n?: unknown }).n !== 'number') return { status: 'error', error: 'bad payload' };
        handled.add(job.id);
        worked.update(handled.size);
        if (handled.size === MESSAGES) allHandled();
        return undefined;
      },
      { concurrency: CONCURRENCY, autoStart: false },
    );
    await worker.start();
    await done;
    // Waits for the last results to reach the store.
    await worker.stop();
    worked.finish();
    const workMs = performance.now() - workStart;

    const status = await client.queueStatus(QUEUE);
    const counts = MESSAGE_STATES.filter((state) => status.counts[state] > 0).map(
      (state) => `${state} ${formatCount(status.counts[state])}`,
    );
    console.log(`queue ${QUEUE}: ${formatCount(status.total)} messages (${counts.join(', ') || 'none'})`);
    console.log(`enqueued ${formatCount(MESSAGES)} in ${seconds(enqueueMs)} (${rate(MESSAGES, enqueueMs)}/s)`);
    console.log(`processed ${formatCount(MESSAGES)} in ${seconds(workMs)} (${rate(MESSAGES, workMs)}/s)`);
    const finished = status.counts['done-awaiting-gc'] + status.counts['done-with-backoff'];
    return finished === MESSAGES ? 0 : 1;
  } finally {
    // Also stops the worker if something above failed.
    await client.close();
  }
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(2)} s`;
}

function rate(count: number, ms: number): string {
  return formatCount(Math.round(count / (ms / 1000)));
}

main().then(
  (code) => (process.exitCode = code),
  (error: unknown) => {
    console.error('kvmq demo:', error);
    process.exitCode = 1;
  },
);
