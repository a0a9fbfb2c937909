/**
 * `node --import tsx bench/dashboard.ts --store URL [--backlog N] [--failed N] [--handled N] [--runs N]`
 *
 * What the dashboard's pages cost on a deep queue: a queue with events on holds `failed` failed messages
 * (100), `handled` handled ones (1,000, so the chart has events) and a backlog of N queued ones (1,000,000).
 * Times GET of the queue page, its failed listing, a message page, the front page and chart.json over
 * HTTP on loopback (the median of `runs` requests each, and the slowest), and prints a markdown row per page;
 * chart.json answers from a 5 s cache, so the chart's read of the events is also timed uncached.
 * The target is issue 12's: the queue page in ≤ 100 ms on every store.
 */
import { parseArgs } from 'node:util';
import { ChartSource } from '../src/dashboard/charts.js';
import { startDashboardServer } from '../src/dashboard/server.js';
import { fill, sampleMs, signal } from './common.js';
import { benchClient, buildBacklog, DEEP_QUEUE_OPTIONS } from './deep-queue.js';

const { values } = parseArgs({
  options: { ...DEEP_QUEUE_OPTIONS, handled: { type: 'string', default: '1000' } },
});
const backlog = Number(values.backlog);
const failedCount = Number(values.failed);
const handledCount = Number(values.handled);
const runs = Number(values.runs);
const { client, kind } = await benchClient(values.store);
const queue = `bench-dashboard-${Date.now().toString(36)}`;

try {
  await client.configure(queue, { events: true });
  process.stderr.write(`${kind}: ${handledCount} handled and ${failedCount} failed messages...\n`);
  await fill(client, queue, handledCount + failedCount, 1000);
  let seen = 0;
  const done = signal();
  const worker = client.worker(
    queue,
    () => {
      seen++;
      if (seen === handledCount + failedCount) done.fire();
      return seen % Math.max(1, Math.round((handledCount + failedCount) / failedCount)) === 0
        ? { status: 'error', error: 'bench failure' }
        : undefined;
    },
    { concurrency: 16 },
  );
  await done.promise;
  await worker.stop();
  await buildBacklog(client, kind, queue, backlog);
  const failedId = (await client.list(queue, { state: 'failed', limit: 1 })).messages[0]?.id ?? 'none';
  const server = await startDashboardServer(client, { listen: '127.0.0.1:0' });
  try {
    const pages: [string, string][] = [
      [`queue page (${(backlog + handledCount + failedCount).toLocaleString('en')} messages)`, `queues/${queue}`],
      ['queue page, failed', `queues/${queue}?state=failed`],
      ['message page', `queues/${queue}/messages/${failedId}`],
      ['front page', ''],
      ['chart.json (last hour of events)', `queues/${queue}/chart.json`],
    ];
    for (const [what, path] of pages) {
      const [median, max] = await sampleMs(runs, async () => {
        const response = await fetch(server.url + path);
        await response.arrayBuffer();
        if (response.status !== 200) throw new Error(`${path}: HTTP ${response.status}`);
      });
      const target = path === `queues/${queue}` ? '≤ 100 ms' : '';
      const verdict = target === '' ? '' : median <= 100 ? 'ok' : 'FAIL';
      console.log(`| ${kind} | ${what} | ${median.toFixed(2)} ms | ${max.toFixed(2)} ms | ${target} | ${verdict} |`);
    }
    // chart.json answers from a 5 s cache: time the read behind it, uncached, as well.
    const [median, max] = await sampleMs(runs, async () => {
      await new ChartSource(client).lastHour(queue);
    });
    console.log(
      `| ${kind} | chart data uncached (up to eventsMaxCount events) | ${median.toFixed(2)} ms | ${max.toFixed(2)} ms |  |  |`,
    );
  } finally {
    await server.close();
  }
  await client.clear(queue);
} finally {
  await client.close();
}
