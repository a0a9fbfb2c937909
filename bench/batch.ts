/**
 * `node --import tsx bench/batch.ts --store URL [--store URL ...] [--messages 20000] [--rounds 3] [--size 100]
 *   [--concurrency 1,100] [--batch-concurrency 1]`
 *
 * Batched against unbatched consumption, in one process on each store, the order of the runs turning each
 * round: a queue filled beforehand (untimed), drained by one worker whose handler does nothing. Unbatched: a
 * plain handler at each of `--concurrency` (1, the default worker; 100, as many messages in flight as a batch
 * holds); batched: the option `batch: { size }` at `--batch-concurrency`. Prints each round's rates and the
 * median batched/unbatched ratios per store: on a shared machine the ratio of runs side by side is what
 * holds, not the rates themselves.
 */
import { parseArgs } from 'node:util';
import { connect, type Worker } from '../src/index.js';
import { fill, median, signal } from './common.js';

const { values } = parseArgs({
  options: {
    store: { type: 'string', multiple: true },
    messages: { type: 'string', default: '20000' },
    rounds: { type: 'string', default: '3' },
    size: { type: 'string', default: '100' },
    concurrency: { type: 'string', default: '1,100' },
    'batch-concurrency': { type: 'string', default: '1' },
  },
});
const stores = values.store ?? [];
if (stores.length === 0) throw new TypeError('usage: bench/batch.ts --store URL [--store URL ...]');
const n = Number(values.messages);
const rounds = Number(values.rounds);
const size = Number(values.size);
const plainConcurrency = values.concurrency.split(',').map(Number);
const batchConcurrency = Number(values['batch-concurrency']);

/** Messages a second draining a filled queue of n: batched, or plain at `concurrency`. */
async function drain(url: string, concurrency: number | 'batched', messages = n): Promise<number> {
  const batched = concurrency === 'batched';
  const client = await connect(url, { maintenance: false });
  const queue = `bench-batch-${batched ? 'b' : 'u'}-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;
  await fill(client, queue, messages, 1000);
  let handled = 0;
  const all = signal();
  const count = (k: number): void => {
    handled += k;
    if (handled >= messages) all.fire();
  };
  const start = performance.now();
  const worker: Worker = batched
    ? client.worker(queue, (jobs) => count(jobs.length), {
        batch: { size },
        concurrency: batchConcurrency,
        autoStart: false,
      })
    : client.worker(queue, () => count(1), { concurrency, autoStart: false });
  await worker.start();
  await all.promise;
  await worker.stop();
  const ms = performance.now() - start;
  await client.clear(queue);
  await client.close();
  return (messages * 1000) / ms;
}

async function main(): Promise<void> {
  const runs: (number | 'batched')[] = ['batched', ...plainConcurrency];
  for (const url of stores) {
    const kind = url.split(':')[0];
    for (const run of runs) await drain(url, run, Math.min(n, 2000));
    const ratios = new Map<number, number[]>(plainConcurrency.map((c) => [c, []]));
    for (let round = 1; round <= rounds; round++) {
      // Each round starts one run later: none is always first or last.
      const order = runs.map((_, i) => runs[(i + round - 1) % runs.length] as number | 'batched');
      const rates = new Map<number | 'batched', number>();
      for (const run of order) rates.set(run, await drain(url, run));
      const batched = rates.get('batched') ?? 0;
      const line = plainConcurrency.map((c) => {
        const plain = rates.get(c) ?? 0;
        ratios.get(c)?.push(batched / plain);
        return `unbatched c=${c} ${plain.toFixed(0)}/s (x${(batched / plain).toFixed(2)})`;
      });
      console.log(`${kind} round ${round}: batched ${batched.toFixed(0)}/s; ${line.join('; ')}`);
    }
    const medians = plainConcurrency.map((c) => `vs c=${c} x${median(ratios.get(c) ?? []).toFixed(2)}`);
    console.log(
      `${kind}: median batched/unbatched ${medians.join(', ')} (${n} messages, batch size ${size} at ` +
        `concurrency ${batchConcurrency})`,
    );
  }
}

await main();
