/**
 * `node --import tsx bench/redis-flow.ts --store redis://HOST:PORT [--sizes 1000,10000] [--children 64]`
 *
 * Flows on Redis, by the server's CPU (INFO cpu, user + system): `write`, the `flow` script call of a tree of
 * each size (a root, 9 parents, the rest leaves in another queue), in ms of server CPU and of wall-clock time
 * for the call (the server serves nothing else meanwhile); `finish`, the µs of server CPU per
 * message of finishing (successes, in batches of --children) a queue's flow children, which pay their parent's
 * count, beside the same for plain messages of a queue without flows. Figures move with the machine's load:
 * compare runs made side by side.
 */
import { serverCpuUs } from './redis-info.js';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { connect, type FlowTree } from '../src/index.js';
import { openStore } from '../src/stores/url.js';
import { successFinish } from './common.js';
import type { ClaimRequest } from '../src/stores/contract/contract.js';

const { values } = parseArgs({
  options: {
    store: { type: 'string' },
    sizes: { type: 'string', default: '1000,10000' },
    children: { type: 'string', default: '64' },
  },
});
const url = values.store ?? process.env.KVMQ_TEST_REDIS_URL;
if (url === undefined) throw new TypeError('--store redis://HOST:PORT is required (or $KVMQ_TEST_REDIS_URL)');
const sizes = values.sizes.split(',').map(Number);
const batch = Number(values.children);
const admin = new Redis(url);
const client = await connect(url, { maintenance: false });
const store = await openStore(url);
const base = `flow-bench-${Date.now()}`;

const serverUs = (): Promise<number> => serverCpuUs(admin);

/** A tree of `size` messages: a root over 9 parents in `queue`, the leaves spread under them in `leaves`. */
function tree(queue: string, leaves: string, size: number): FlowTree {
  const per = Math.ceil((size - 10) / 9);
  let left = size - 10;
  return {
    queue,
    payload: 'root',
    children: Array.from({ length: 9 }, (_, i) => {
      const count = Math.min(per, left);
      left -= count;
      return {
        queue,
        payload: i,
        children: Array.from({ length: count }, (__, j) => ({ queue: leaves, payload: j })),
      };
    }),
  };
}

/** Server µs per message of claiming and finishing every message of `queue` as successes, `batch` at a time. */
async function finishAll(queue: string): Promise<number> {
  const request: ClaimRequest = {
    consumerId: 'bench',
    max: batch,
    lockMs: 60_000,
    accepts: null,
    eoqBackoffMs: () => 100,
  };
  let us = 0;
  let finished = 0;
  for (;;) {
    const { messages } = await store.claim(queue, request);
    if (messages.length === 0) break;
    const before = await serverUs();
    await store.finish(queue, 'bench', messages.map(successFinish));
    us += (await serverUs()) - before;
    finished += messages.length;
  }
  return us / finished;
}

try {
  const write: Record<string, { serverMs: number; wallMs: number }> = {};
  for (const size of sizes) {
    const before = await serverUs();
    const started = performance.now();
    await client.flow(tree(`${base}-${size}`, `${base}-${size}-leaves`, size));
    write[size] = {
      wallMs: Math.round(performance.now() - started),
      serverMs: Math.round(((await serverUs()) - before) / 100) / 10,
    };
  }
  const size = sizes[0] ?? 1000;
  const plain = `${base}-plain`;
  await client.enqueueBatch(
    plain,
    Array.from({ length: size }, (_, i) => ({ payload: i })),
  );
  const finish = {
    plainUs: Math.round((await finishAll(plain)) * 100) / 100,
    childUs: Math.round((await finishAll(`${base}-${size}-leaves`)) * 100) / 100,
  };
  console.log(JSON.stringify({ write, finish }));
} finally {
  await client.clear(...sizes.flatMap((s) => [`${base}-${s}`, `${base}-${s}-leaves`]), `${base}-plain`);
  await client.close();
  await store.close();
  admin.disconnect();
}
