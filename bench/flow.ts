/**
 * `node --import tsx bench/flow.ts --store URL [--store URL ...] [--children 1000] [--payload 0] [--rounds 5]
 *   [--connections 1]`
 *
 * Flows on each store, in one process: `write`, the wall-clock time of `client.flow` for a tree of one parent
 * and `--children` children in another queue, each child's payload `--payload` bytes (0: a small number) (one
 * store round trip on SQLite, PostgreSQL and Redis; ZooKeeper writes one multi while the tree fits its packet
 * limit, else stages it: several multis and a last one); `children run`, from the children's worker starting to
 * the end of the last child's handler; `release`, the time from the end
 * of the last child's handler to the start of the parent's, with one worker on each queue (the children's at
 * concurrency 64, handlers that do nothing; `--connections N`: N children's workers, each on its own connection, as
 * in N processes). Each round uses fresh queues; medians and the slowest round are
 * printed with the machine's load. Speed is reported, never enforced.
 */
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { connect, type Client } from '../src/index.js';
import { freshQueues, median, signal } from './common.js';

const { values } = parseArgs({
  options: {
    store: { type: 'string', multiple: true },
    children: { type: 'string', default: '1000' },
    payload: { type: 'string', default: '0' },
    rounds: { type: 'string', default: '5' },
    connections: { type: 'string', default: '1' },
  },
});
const stores = values.store ?? [];
if (stores.length === 0) throw new TypeError('usage: bench/flow.ts --store URL [--store URL ...]');
const childCount = Number(values.children);
const payloadBytes = Number(values.payload);
const rounds = Number(values.rounds);
const connections = Number(values.connections);

interface Round {
  readonly writeMs: number;
  /** From the children's worker starting to the last child's handler ending. */
  readonly childrenMs: number;
  readonly releaseMs: number;
}

async function round(client: Client, others: readonly Client[], names: ReturnType<typeof freshQueues>): Promise<Round> {
  const parentQueue = names.queue('parent');
  const childQueue = names.queue('child');
  const pad = 'x'.repeat(payloadBytes);
  const children = Array.from({ length: childCount }, (_, i) => ({
    queue: childQueue,
    payload: payloadBytes === 0 ? i : `${i}${pad}`,
  }));
  const writeStart = performance.now();
  await client.flow({ queue: parentQueue, payload: 'parent', children });
  const writeMs = performance.now() - writeStart;
  let handled = 0;
  let lastChildEnd = 0;
  let parentStart = 0;
  const parentRan = signal();
  const childrenStart = performance.now();
  const childWorkers = [client, ...others].map((c) =>
    c.worker(
      childQueue,
      () => {
        handled += 1;
        if (handled === childCount) lastChildEnd = performance.now();
        return Promise.resolve({ status: 'success' as const });
      },
      { concurrency: 64 },
    ),
  );
  const parentWorker = client.worker(parentQueue, () => {
    parentStart = performance.now();
    parentRan.fire();
    return Promise.resolve({ status: 'success' as const });
  });
  await parentRan.promise;
  await Promise.all([...childWorkers.map((w) => w.stop()), parentWorker.stop()]);
  return { writeMs, childrenMs: lastChildEnd - childrenStart, releaseMs: parentStart - lastChildEnd };
}

async function main(): Promise<void> {
  for (const url of stores) {
    const kind = url.split(':')[0];
    const client = await connect(url, { maintenance: false });
    // More children's workers, each on a connection of its own (as another process's would be).
    const others = await Promise.all(
      Array.from({ length: connections - 1 }, () => connect(url, { maintenance: false })),
    );
    const names = freshQueues('bench-flow');
    try {
      await round(client, others, names);
      const results: Round[] = [];
      for (let i = 1; i <= rounds; i++) {
        const result = await round(client, others, names);
        results.push(result);
        console.log(
          `${kind} round ${i}: write ${result.writeMs.toFixed(1)} ms, children run in ${result.childrenMs.toFixed(0)} ms, parent started ` +
            `${result.releaseMs.toFixed(1)} ms after the last child's handler ended`,
        );
      }
      const write = results.map((r) => r.writeMs);
      const release = results.map((r) => r.releaseMs);
      const run = results.map((r) => r.childrenMs);
      console.log(
        `${kind}: 1 parent + ${childCount} children of ${payloadBytes || 'small'} payloads, ${connections} children's worker(s): write median ${median(write).toFixed(1)} ms ` +
          `(slowest ${Math.max(...write).toFixed(1)}); children run median ${median(run).toFixed(0)} ms; release median ${median(release).toFixed(1)} ms ` +
          `(slowest ${Math.max(...release).toFixed(1)}); load ${loadavg()[0]?.toFixed(2)}`,
      );
    } finally {
      for (const queue of names.made) await client.clear(queue).catch(() => undefined);
      await Promise.all([client, ...others].map((c) => c.close()));
    }
  }
}

await main();
