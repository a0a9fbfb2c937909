/** Messages one at a time through a concurrency-1 worker: what a store writes per message, nothing batched. */
import type { Client, Worker } from '../src/index.js';
import { signal } from './common.js';

export interface OneByOne {
  readonly worker: Worker;
  /**
   * Sends n messages, each once the handler took the one before, and returns once the last is finished in the
   * store: a count taken then stops at the last message's finish (the idle polls after it are nobody's).
   */
  send(n: number): Promise<void>;
}

/**
 * Starts a concurrency-1 worker on `queue` and lets it handle one warm-up message, then `settleMs` for the
 * store to go quiet before anything is counted; `pollMs` is how often send() looks for the last finish.
 */
export async function oneByOne(client: Client, queue: string, settleMs: number, pollMs: number): Promise<OneByOne> {
  let next = signal();
  const worker = client.worker(queue, () => next.fire(), { concurrency: 1 });
  await client.enqueue(queue, 'warm-up');
  await next.promise;
  await new Promise((resolve) => setTimeout(resolve, settleMs));
  return {
    worker,
    async send(n) {
      let last = '';
      for (let i = 0; i < n; i++) {
        next = signal();
        last = (await client.enqueue(queue, { i })).id;
        await next.promise;
      }
      while ((await client.status(queue, last))?.state !== 'done-awaiting-gc') {
        await new Promise((resolve) => setTimeout(resolve, pollMs));
      }
    },
  };
}
