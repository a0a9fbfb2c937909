/**
 * `node --import tsx bench/redis-server-cpu.ts --store redis://HOST:PORT [--n N] [--batch B]`
 *
 * The Redis server's CPU per message in each step of a message's life, apart: N messages enqueued
 * (`enqueueBatch`, 1,000 a call), claimed B at a time, then finished B at a time (successes), each step
 * timed by the server's own `INFO cpu` (user + system of the whole server) and divided by N. With
 * bench/cpu.ts (the client's side) it says which side bounds a worker's throughput on this machine.
 */
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { connect } from '../src/index.js';
import { openStore } from '../src/store/url.js';
import type { ClaimedMessage } from '../src/store/contract.js';

const { values } = parseArgs({
  options: {
    store: { type: 'string' },
    n: { type: 'string', default: '32000' },
    batch: { type: 'string', default: '64' },
  },
});
const url = values.store ?? process.env.KVMQ_TEST_REDIS_URL;
if (url === undefined) throw new TypeError('--store redis://HOST:PORT is required (or $KVMQ_TEST_REDIS_URL)');
const n = Number(values.n);
const batch = Number(values.batch);
const admin = new Redis(url);
const client = await connect(url, { maintenance: false });
const store = await openStore(url);
const queue = `server-cpu-${Date.now()}`;

/** Seconds of CPU the server has used so far. */
async function serverCpu(): Promise<number> {
  const info = await admin.info('cpu');
  const field = (name: string): number => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? NaN);
  return field('used_cpu_user') + field('used_cpu_sys');
}

/** µs of server CPU per message while `step` runs. */
async function perMessage(step: () => Promise<void>): Promise<number> {
  const before = await serverCpu();
  await step();
  return (((await serverCpu()) - before) * 1e6) / n;
}

try {
  const claimed: ClaimedMessage[][] = [];
  const enqueueUs = await perMessage(async () => {
    for (let sent = 0; sent < n; sent += 1000) {
      const size = Math.min(1000, n - sent);
      await client.enqueueBatch(
        queue,
        Array.from({ length: size }, (_, i) => ({ payload: { i: sent + i } })),
      );
    }
  });
  const request = { consumerId: 'bench', max: batch, lockMs: 60_000, accepts: null, eoqBackoffMs: () => 100 };
  const claimUs = await perMessage(async () => {
    for (let got = 0; got < n;) {
      const { messages } = await store.claim(queue, request);
      if (messages.length === 0) break;
      claimed.push([...messages]);
      got += messages.length;
    }
  });
  const finishUs = await perMessage(async () => {
    for (const messages of claimed) {
      const finishes = messages.map((m) => ({
        id: m.id,
        attempt: m.attempt,
        outcome: 'success' as const,
        backoffMs: 0,
        error: null,
        startedAt: Date.now(),
      }));
      await store.finish(queue, 'bench', finishes);
    }
  });
  const round = (us: number): number => Number(us.toFixed(2));
  console.log(
    JSON.stringify({
      n,
      batch,
      serverUsPerMessage: { enqueue: round(enqueueUs), claim: round(claimUs), finish: round(finishUs) },
    }),
  );
} finally {
  await client.clear(queue);
  await client.close();
  await store.close();
  admin.disconnect();
}
