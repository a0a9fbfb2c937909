/**
 * `node --import tsx bench/progress.ts [--store URL] [--handlers N] [--per-second N] [--seconds N]`
 *
 * What chatty handlers cost the store: `handlers` (1,000) messages run at once, each handler reporting
 * `job.progress` `per-second` (100) times a second for `seconds` (5). Counts the reports and the store calls
 * that reach the store (the store's `report`, wrapped) and prints them per second beside the progress calls
 * made. Coalescing bounds the reports at handlers × 1000 / REPORT_EVERY_MS (4,000/s for 1,000 handlers, plus one
 * per handler at the window's edge), whatever the handlers do; the calls are fewer, as the reports due in one tick
 * share one.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { connect, REPORT_EVERY_MS } from '../src/index.js';
import { fill } from './common.js';
import { storeOf } from '../src/client/client-store.js';

const { values } = parseArgs({
  options: {
    store: { type: 'string' },
    handlers: { type: 'string', default: '1000' },
    'per-second': { type: 'string', default: '100' },
    seconds: { type: 'string', default: '5' },
  },
});
const handlers = Number(values.handlers);
const everyMs = 1000 / Number(values['per-second']);
const seconds = Number(values.seconds);
const client = await connect(values.store, { maintenance: false });
const store = storeOf(client);
const queue = `bench-progress-${Date.now().toString(36)}`;

const report = store.report?.bind(store);
if (report === undefined) throw new Error(`the ${store.kind} store keeps no reports`);
let reports = 0;
let calls = 0;
store.report = (q, consumerId, batch) => {
  calls += 1;
  reports += batch.length;
  return report(q, consumerId, batch);
};

try {
  await fill(client, queue, handlers, 1000);
  let progressCalls = 0;
  let started = 0;
  let everyStarted = (): void => undefined;
  const allStarted = new Promise<void>((resolve) => (everyStarted = resolve));
  const until = { at: Infinity };
  const worker = client.worker(
    queue,
    async (job) => {
      if (++started === handlers) everyStarted();
      await allStarted;
      for (let i = 0; performance.now() < until.at; i++) {
        job.progress(i);
        progressCalls += 1;
        await sleep(everyMs);
      }
    },
    { concurrency: handlers, lockMs: 60_000 },
  );
  await allStarted;
  const from = { reports, calls, progressCalls, at: performance.now() };
  until.at = from.at + seconds * 1000;
  await sleep(seconds * 1000);
  const elapsed = (performance.now() - from.at) / 1000;
  const perSecond = (n: number): string => Math.round(n / elapsed).toLocaleString('en');
  // One write per message per REPORT_EVERY_MS, and one more at the window's edge.
  const bound = perSecond(handlers * ((seconds * 1000) / REPORT_EVERY_MS + 1));
  await worker.stop();
  process.stdout.write(
    `| ${store.kind} | ${handlers} | ${perSecond(progressCalls - from.progressCalls)} | ` +
      `${perSecond(reports - from.reports)} (bound ${bound}) | ${perSecond(calls - from.calls)} |\n`,
  );
} finally {
  await client.close();
}
