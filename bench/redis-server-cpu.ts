/**
 * `node --import tsx bench/redis-server-cpu.ts --store redis://HOST:PORT [--n N] [--batch B]`
 *
 * The Redis server's CPU per message in each step of a message's life, apart: N messages enqueued
 * (`enqueueBatch`, 1,000 a call), claimed B at a time, then finished B at a time (successes), each step
 * timed by the server's own `INFO cpu` (user + system of the whole server) and divided by N. With
 * bench/cpu.ts (the client's side) it says which side bounds a worker's throughput on this machine.
 * Then the fixed cost of one script call, in µs of server CPU per call: `single` (--calls C, default 2,000)
 * single-message enqueues, claims of one and finishes of one, and `emptyClaim`, a claim that finds nothing
 * (what an idle worker pays per wake-up). Last, `idle`: --calls messages enqueued one at a time at 500/s to a
 * worker at concurrency 1, as bench/peers/redis.ts's latency phase: script calls and server CPU per message.
 */
import { serverCpuUs } from './redis-info.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { connect } from '../src/index.js';
import { openStore } from '../src/stores/url.js';
import { plainMessage } from '../src/stores/contract/new-message.js';
import { fill, successFinish } from './common.js';
import type { ClaimedMessage, ClaimRequest } from '../src/stores/contract/contract.js';

const { values } = parseArgs({
  options: {
    store: { type: 'string' },
    n: { type: 'string', default: '32000' },
    batch: { type: 'string', default: '64' },
    calls: { type: 'string', default: '2000' },
  },
});
const url = values.store ?? process.env.KVMQ_TEST_REDIS_URL;
if (url === undefined) throw new TypeError('--store redis://HOST:PORT is required (or $KVMQ_TEST_REDIS_URL)');
const n = Number(values.n);
const batch = Number(values.batch);
const calls = Number(values.calls);
const admin = new Redis(url);
const client = await connect(url, { maintenance: false });
const store = await openStore(url);
const queue = `server-cpu-${Date.now()}`;

/** Seconds of CPU the server has used so far. */
async function serverCpu(): Promise<number> {
  return (await serverCpuUs(admin)) / 1e6;
}

/** µs the server has spent running scripts so far (INFO commandstats: FCALL, EVALSHA and EVAL, without their I/O). */
async function scriptUs(): Promise<number> {
  const info = await admin.info('commandstats');
  let us = 0;
  for (const match of info.matchAll(/^cmdstat_(?:eval(?:sha)?|fcall):.*?usec=(\d+)/gm)) us += Number(match[1]);
  return us;
}

/** µs of server CPU per message (or per call: `per`) while `step` runs. */
async function perMessage(step: () => Promise<void>, per = n): Promise<number> {
  const before = await serverCpu();
  await step();
  return (((await serverCpu()) - before) * 1e6) / per;
}

/** µs of server CPU per call while `step` runs, and of that the scripts' own (`script`). */
async function perCallOf(step: () => Promise<void>): Promise<{ cpu: number; script: number }> {
  const before = await scriptUs();
  const cpu = await perMessage(step, calls);
  return { cpu, script: ((await scriptUs()) - before) / calls };
}

/** Server CPU per call of single-message enqueues, claims and finishes, and of empty claims. */
async function perCall(request: ClaimRequest): Promise<Record<string, { cpu: number; script: number }>> {
  const one = { ...request, max: 1 };
  const enqueue = await perCallOf(async () => {
    for (let i = 0; i < calls; i += 1)
      await store.enqueue(queue, [plainMessage(`single-${i}`, Buffer.from(JSON.stringify({ i })))]);
  });
  const held: ClaimedMessage[] = [];
  const claim = await perCallOf(async () => {
    for (let i = 0; i < calls; i += 1) held.push(...(await store.claim(queue, one)).messages);
  });
  const finish = await perCallOf(async () => {
    for (const m of held) await store.finish(queue, 'bench', [successFinish(m)]);
  });
  const emptyClaim = await perCallOf(async () => {
    for (let i = 0; i < calls; i += 1) await store.claim(queue, one);
  });
  return { enqueue, claim, finish, emptyClaim };
}

/** Script calls and server CPU per message handed one at a time to an idle worker (concurrency 1, 500/s). */
async function idleWorker(): Promise<{ scriptCalls: number; cpu: number }> {
  const idle = `${queue}-idle`;
  let handled = 0;
  const worker = client.worker(idle, () => void (handled += 1), { concurrency: 1 });
  await sleep(200);
  const evalCalls = async (): Promise<number> => {
    const info = await admin.info('commandstats');
    let count = 0;
    for (const match of info.matchAll(/^cmdstat_(?:eval(?:sha)?|fcall):calls=(\d+)/gm)) count += Number(match[1]);
    return count;
  };
  const before = await evalCalls();
  const cpu = await perMessage(async () => {
    for (let i = 0; i < calls; i += 1) {
      await client.enqueue(idle, { i });
      await sleep(2);
    }
    while (handled < calls) await sleep(10);
  }, calls);
  const scriptCalls = ((await evalCalls()) - before) / calls;
  await worker.stop();
  await client.clear(idle);
  return { scriptCalls, cpu };
}

try {
  const claimed: ClaimedMessage[][] = [];
  const enqueueUs = await perMessage(() => fill(client, queue, n, 1000));
  const request: ClaimRequest = {
    consumerId: 'bench',
    max: batch,
    lockMs: 60_000,
    accepts: null,
    eoqBackoffMs: () => 100,
  };
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
      const finishes = messages.map(successFinish);
      await store.finish(queue, 'bench', finishes);
    }
  });
  const single = await perCall(request);
  const idle = await idleWorker();
  const round = (us: number): number => Number(us.toFixed(2));
  console.log(
    JSON.stringify({
      n,
      batch,
      serverUsPerMessage: { enqueue: round(enqueueUs), claim: round(claimUs), finish: round(finishUs) },
      serverUsPerCall: Object.fromEntries(Object.entries(single).map(([step, us]) => [step, round(us.cpu)])),
      scriptUsPerCall: Object.fromEntries(Object.entries(single).map(([step, us]) => [step, round(us.script)])),
      idle: { scriptCallsPerMessage: round(idle.scriptCalls), serverUsPerMessage: round(idle.cpu) },
    }),
  );
} finally {
  await client.clear(queue);
  await client.close();
  await store.close();
  admin.disconnect();
}
