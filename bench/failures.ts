/**
 * `node --import tsx bench/failures.ts --store URL [--backlog N] [--failed N] [--runs N]`
 *
 * What finding failures costs on a deep queue: a queue holds `failed` failed
 * messages (100) and then a backlog of N queued ones (1,000,000); times
 * `list(state: failed, limit: 100)` and `queueStatus` (the median of `runs`
 * calls each, with the slowest) and prints a markdown row per figure. The
 * targets are issue 11's: list ≤ 10 ms on SQLite and Redis, ≤ 50 ms on
 * ZooKeeper and etcd; queueStatus ≤ 50 ms everywhere.
 */
import { parseArgs } from 'node:util';
import { fill, sampleMs } from './common.js';
import { benchClient, buildBacklog, DEEP_QUEUE_OPTIONS } from './deep-queue.js';

const { values } = parseArgs({ options: DEEP_QUEUE_OPTIONS });
const backlog = Number(values.backlog);
const failedCount = Number(values.failed);
const runs = Number(values.runs);
const { client, kind } = await benchClient(values.store);
const listTarget = kind === 'sqlite' || kind === 'redis' ? 10 : 50;
const queue = `bench-failures-${Date.now().toString(36)}`;

try {
  process.stderr.write(`${kind}: ${failedCount} failed messages...\n`);
  await fill(client, queue, failedCount, 1000);
  let failed = 0;
  const worker = client.worker(queue, () => ({ status: 'error', error: 'bench failure' }), { concurrency: 16 });
  await new Promise<void>((resolve) => {
    worker.on('failed', () => {
      if (++failed === failedCount) resolve();
    });
  });
  await worker.stop();
  await buildBacklog(client, kind, queue, backlog);

  const list = await sampleMs(runs, async () => {
    const page = await client.list(queue, { state: 'failed', limit: 100 });
    if (page.messages.length !== Math.min(100, failedCount)) throw new Error(`listed ${page.messages.length}`);
  });
  const status = await sampleMs(runs, async () => {
    const { counts } = await client.queueStatus(queue);
    if (counts.failed !== failedCount || counts.queued !== backlog) throw new Error(JSON.stringify(counts));
  });
  const row = (what: string, [median, max]: [number, number], target: number): string =>
    `| ${kind} | ${what} | ${median.toFixed(2)} ms | ${max.toFixed(2)} ms | ≤ ${target} ms | ${median <= target ? 'ok' : 'FAIL'} |`;
  console.log(row(`list 100 failed among ${backlog.toLocaleString('en')}`, list, listTarget));
  console.log(row(`queueStatus of ${(backlog + failedCount).toLocaleString('en')}`, status, 50));
  await client.clear(queue);
} finally {
  await client.close();
}
