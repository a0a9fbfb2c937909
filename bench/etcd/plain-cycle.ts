/**
 * Enqueue and claim cost of messages that use no scheduling option, and of prioritised ones:
 * `node --import tsx bench/etcd/plain-cycle.ts URL [N] [plain|priority] [BACKLOG]`.
 * Enqueues N messages (batches of 500), then one worker (concurrency 16) takes them all; with BACKLOG,
 * that many lower-priority messages (priorities 1-9) wait behind the N (priority 0 in `priority` mode), so
 * the claim cost shows whether they are scanned. Prints one JSON line: ms per message for each phase.
 */
import { randomBytes } from 'node:crypto';
import { connect, type BatchItem } from '../../src/index.js';

const [url = '', nArg = '5000', mode = 'plain', backlogArg = '0'] = process.argv.slice(2);
const n = Number(nArg);
const backlog = Number(backlogArg);
const client = await connect(`${url}/bench-${randomBytes(4).toString('hex')}`, { maintenance: false });
const q = 'cycle';

async function fill(items: BatchItem[]): Promise<void> {
  for (let i = 0; i < items.length; i += 500) await client.enqueueBatch(q, items.slice(i, i + 500));
}

if (backlog > 0) {
  await fill(Array.from({ length: backlog }, (_, i) => ({ payload: { i }, priority: 1 + (i % 9) })));
}
const items: BatchItem[] = Array.from({ length: n }, (_, i) =>
  mode === 'priority' ? { payload: { i }, priority: 0 } : { payload: { i } },
);
const t0 = performance.now();
await fill(items);
const t1 = performance.now();
let handled = 0;
let done: () => void = () => undefined;
const all = new Promise<void>((resolve) => (done = resolve));
const worker = client.worker(
  q,
  () => {
    handled += 1;
    if (handled === n) done();
  },
  { concurrency: 16 },
);
await all;
const t2 = performance.now();
await worker.stop();
await client.clear(q);
await client.close();
console.log(JSON.stringify({ mode, n, backlog, enqueueMsPerMsg: (t1 - t0) / n, claimMsPerMsg: (t2 - t1) / n }));
