/**
 * `node --import tsx bench/zookeeper/plain-cost.ts --store zookeeper://HOST:PORT/CHROOT [--n 2000] [--priorities 0]
 *   [--batch 1] [--claims N]`
 *
 * The cost of a message at the store, without a worker: N enqueues one at a time (each awaited; or in batches of
 * --batch), then --claims claims of one message each, each finished (success) before the next. Prints ms per
 * message for each phase, as JSON. With --priorities P (> 0), message i gets priority (i mod P) * 10: the claim
 * cost with several priority levels, where every claim takes the highest level's oldest message.
 * Uses only the Store contract, so the same file runs on any version of kvmq with it.
 */
import { parseArgs } from 'node:util';
import { connect } from '../../src/index.js';
import { storeOf } from '../../src/client/client-store.js';
import { successFinish } from '../common.js';

const { values } = parseArgs({
  options: {
    store: { type: 'string' },
    n: { type: 'string', default: '2000' },
    priorities: { type: 'string', default: '0' },
    batch: { type: 'string', default: '1' },
    claims: { type: 'string' },
    queue: { type: 'string', default: `plain-${process.pid}-${Date.now()}` },
  },
});
if (values.store === undefined) throw new TypeError('give --store zookeeper://HOST:PORT/CHROOT');
const n = Number(values.n);
const priorities = Number(values.priorities);
const batch = Number(values.batch);
const claims = values.claims === undefined ? n : Number(values.claims);
const queue = values.queue;

const client = await connect(values.store, { maintenance: false });
try {
  const enqueueStart = performance.now();
  const options = (i: number) => (priorities > 0 ? { priority: (i % priorities) * 10 } : {});
  for (let i = 0; i < n; i += batch) {
    if (batch === 1) await client.enqueue(queue, { i }, options(i));
    else {
      const items = Array.from({ length: Math.min(batch, n - i) }, (_, k) => ({
        payload: { i: i + k },
        ...options(i + k),
      }));
      await client.enqueueBatch(queue, items);
    }
  }
  const enqueueMs = performance.now() - enqueueStart;

  const claimStart = performance.now();
  let claimed = 0;
  while (claimed < claims) {
    const { messages } = await storeOf(client).claim(queue, {
      consumerId: 'bench',
      max: 1,
      lockMs: 60_000,
      accepts: null,
      eoqBackoffMs: () => 10,
    });
    const message = messages[0];
    if (message === undefined) continue;
    await storeOf(client).finish(queue, 'bench', [successFinish(message)]);
    claimed += 1;
  }
  const claimMs = performance.now() - claimStart;
  const backlog = n - claims;
  console.log(
    JSON.stringify({
      n,
      priorities,
      backlog,
      enqueueMsPerMessage: +(enqueueMs / n).toFixed(4),
      claimFinishMsPerMessage: +(claimMs / claims).toFixed(4),
    }),
  );
  // What is left goes, so runs on one server do not pile up znodes.
  await client.clear(queue);
} finally {
  await client.close();
}
