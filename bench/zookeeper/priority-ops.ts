/**
 * `node --import tsx bench/zookeeper/priority-ops.ts --store zookeeper://HOST:PORT/CHROOT [--n 500]
 *   [--priorities 10] [--drain 5000]`
 *
 * What a message costs in ZooKeeper operations, counted on the store's session (deterministic, unlike times):
 * - one enqueue per priority (each makes its sub-queue), then `--n` enqueues one at a time, then claims of one
 *   message each, each finished before the next: write operations, write requests (multis and single writes),
 *   multis and read requests per enqueue (those that make a sub-queue apart) and per claim (the finish not
 *   counted). With `--priorities P` (> 1), message i gets priority (i mod P) * 10, so most claims are below the
 *   highest level.
 * - a worker (16 handlers, no-op) drains `--drain` messages enqueued in batches over the same priorities: messages
 *   per second, the process's CPU time and the operations (as above) per message.
 * Prints one JSON line. Uses the Store contract and the session's methods and counters only, so the same file
 * runs on older kvmq versions.
 */
import { parseArgs } from 'node:util';
import { connect } from '../../src/index.js';
import { storeOf } from '../../src/client/client-store.js';
import type { ZkOp, ZkSession } from '../../src/stores/zookeeper/client.js';
import { successFinish } from '../common.js';

const { values } = parseArgs({
  options: {
    store: { type: 'string' },
    n: { type: 'string', default: '500' },
    priorities: { type: 'string', default: '10' },
    drain: { type: 'string', default: '5000' },
  },
});
if (values.store === undefined) throw new TypeError('give --store zookeeper://HOST:PORT/CHROOT');
const n = Number(values.n);
const priorities = Number(values.priorities);
const drain = Number(values.drain);
const priorityOf = (i: number): number => (priorities > 1 ? (i % priorities) * 10 : 0);

const client = await connect(values.store, { maintenance: false });
const zk = (storeOf(client) as unknown as { ctx: { zk: ZkSession } }).ctx.zk;
// Write requests (a multi, or a single create, set or remove) are not among the session's counters: count them on
// the way through.
let multis = 0;
let singles = 0;
const multi = zk.multi.bind(zk);
zk.multi = (ops: readonly ZkOp[]) => {
  multis += 1;
  return multi(ops);
};
const create = zk.create.bind(zk);
zk.create = (...args: Parameters<ZkSession['create']>) => {
  singles += 1;
  return create(...args);
};
const set = zk.set.bind(zk);
zk.set = (...args: Parameters<ZkSession['set']>) => {
  singles += 1;
  return set(...args);
};
const remove = zk.remove.bind(zk);
zk.remove = (...args: Parameters<ZkSession['remove']>) => {
  singles += 1;
  return remove(...args);
};
interface Counts {
  writes: number;
  multis: number;
  writeRequests: number;
  readRequests: number;
}
const counted = (): Counts => ({
  writes: zk.sent.writes,
  multis,
  writeRequests: multis + singles,
  readRequests: zk.sent.readRequests,
});
const perMessage = (from: Counts, to: Counts, count: number) => ({
  writeOps: +((to.writes - from.writes) / count).toFixed(3),
  writeRequests: +((to.writeRequests - from.writeRequests) / count).toFixed(3),
  multis: +((to.multis - from.multis) / count).toFixed(3),
  readRequests: +((to.readRequests - from.readRequests) / count).toFixed(3),
});

try {
  const queue = `ops-${process.pid}-${Date.now()}`;
  // First one message per priority: each makes its sub-queue (counted apart), the rest write into existing ones.
  const levels = Math.max(priorities, 1);
  const making = counted();
  for (let i = 0; i < levels; i++) await client.enqueue(queue, { i }, { priority: priorityOf(i) });
  const start = counted();
  for (let i = 0; i < n; i++) await client.enqueue(queue, { i }, { priority: priorityOf(i) });
  const enqueued = counted();
  const claiming: Counts = { writes: 0, multis: 0, writeRequests: 0, readRequests: 0 };
  for (let claimed = 0; claimed < n + levels;) {
    const before = counted();
    const { messages } = await storeOf(client).claim(queue, {
      consumerId: 'bench',
      max: 1,
      lockMs: 60_000,
      accepts: null,
      eoqBackoffMs: () => 10,
    });
    const after = counted();
    claiming.writes += after.writes - before.writes;
    claiming.multis += after.multis - before.multis;
    claiming.writeRequests += after.writeRequests - before.writeRequests;
    claiming.readRequests += after.readRequests - before.readRequests;
    const message = messages[0];
    if (message === undefined) continue;
    await storeOf(client).finish(queue, 'bench', [successFinish(message)]);
    claimed += 1;
  }
  await client.clear(queue);

  const drained = `drain-${process.pid}-${Date.now()}`;
  for (let i = 0; i < drain; i += 1000) {
    const items = Array.from({ length: Math.min(1000, drain - i) }, (_, k) => ({
      payload: { i: i + k },
      priority: priorityOf(i + k),
    }));
    await client.enqueueBatch(drained, items);
  }
  let handled = 0;
  let done: () => void = () => undefined;
  const finished = new Promise<void>((resolve) => (done = resolve));
  const draining = counted();
  const cpu = process.cpuUsage();
  const wallStart = performance.now();
  const worker = client.worker(
    drained,
    () => {
      handled += 1;
      if (handled === drain) done();
    },
    { concurrency: 16 },
  );
  await finished;
  const wallMs = performance.now() - wallStart;
  const used = process.cpuUsage(cpu);
  const drainCounts = perMessage(draining, counted(), drain);
  await worker.stop();
  await client.clear(drained);
  console.log(
    JSON.stringify({
      n,
      priorities,
      firstEnqueueOfAPriority: perMessage(making, start, levels),
      perEnqueue: perMessage(start, enqueued, n),
      perClaim: perMessage({ writes: 0, multis: 0, writeRequests: 0, readRequests: 0 }, claiming, n + levels),
      drain,
      drainPerSecond: Math.round(drain / (wallMs / 1000)),
      cpuMsPerMessage: +((used.user + used.system) / 1000 / drain).toFixed(4),
      drainPerMessage: drainCounts,
    }),
  );
} finally {
  await client.close();
}
