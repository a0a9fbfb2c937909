/**
 * `node --import tsx bench/worker-ab.ts --old DIR --store URL [--messages 20000] [--rounds 10]
 *   [--concurrency 64] [--busy-us 0] [--lock-ms N]`
 *
 * This tree's worker against another checkout's (DIR, with its node_modules), in one process on one store,
 * alternating which goes first each round: a queue filled beforehand (untimed), drained by one worker with
 * handlers that spin `--busy-us` µs each. Prints each round's rates, the client's CPU per message and, on
 * Redis, the server's (INFO cpu), then the medians of the new/old ratios: on a shared machine the ratio of
 * runs side by side is what holds, not the rates themselves. `--lock-ms` sets the workers' lockMs: a short one
 * renews the held messages every lockMs / 3 during the drain, so the rate includes the renewals.
 *
 * `--result-bytes N` (no `--old`) compares this tree with itself instead: "old" handlers return nothing, "new"
 * ones return a result of N bytes (a JSON string), so the ratios are what storing a result costs.
 */
import { serverCpuUs as redisCpuUs } from './redis-info.js';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import { connect as connectNew } from '../src/index.js';
import { fill, median, signal } from './common.js';

type Connect = typeof connectNew;

interface Run {
  readonly perSec: number;
  readonly clientUs: number;
  readonly serverUs: number;
}

const { values } = parseArgs({
  options: {
    old: { type: 'string' },
    store: { type: 'string', default: process.env.KVMQ_TEST_REDIS_URL ?? '' },
    messages: { type: 'string', default: '20000' },
    rounds: { type: 'string', default: '10' },
    concurrency: { type: 'string', default: '64' },
    'busy-us': { type: 'string', default: '0' },
    'lock-ms': { type: 'string' },
    'result-bytes': { type: 'string' },
  },
});
const resultBytes = values['result-bytes'] === undefined ? null : Number(values['result-bytes']);
if ((values.old === undefined && resultBytes === null) || values.store === '') {
  throw new TypeError('usage: bench/worker-ab.ts --old DIR --store URL (a checkout to compare with, a store URL)');
}
const url = values.store;
const n = Number(values.messages);
const rounds = Number(values.rounds);
const concurrency = Number(values.concurrency);
const busyMs = Number(values['busy-us']) / 1000;
const lockMs = values['lock-ms'] === undefined ? {} : { lockMs: Number(values['lock-ms']) };
const redis = url.startsWith('redis') ? new Redis(url) : null;

/** The Redis server's CPU so far, in µs (0 on other stores). */
async function serverCpuUs(): Promise<number> {
  return redis === null ? 0 : redisCpuUs(redis);
}

// A JSON string of exactly resultBytes bytes once encoded (its quotes count).
const result = resultBytes === null ? null : { status: 'success' as const, result: 'r'.repeat(resultBytes - 2) };

async function drain(connect: Connect, label: string, withResult = false): Promise<Run> {
  const client = await connect(url, { maintenance: false });
  const queue = `worker-ab-${label}-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;
  await fill(client, queue, n, 1000);
  let handled = 0;
  const all = signal();
  const server = await serverCpuUs();
  const cpu = process.cpuUsage();
  const start = performance.now();
  const worker = client.worker(
    queue,
    () => {
      if (busyMs > 0) for (const end = performance.now() + busyMs; performance.now() < end;);
      handled += 1;
      if (handled === n) all.fire();
      return withResult && result !== null ? result : undefined;
    },
    { concurrency, autoStart: false, ...lockMs },
  );
  await worker.start();
  await all.promise;
  await worker.stop();
  const ms = performance.now() - start;
  const used = process.cpuUsage(cpu);
  const serverUs = (await serverCpuUs()) - server;
  await client.clear(queue);
  await client.close();
  return { perSec: (n * 1000) / ms, clientUs: (used.user + used.system) / n, serverUs: serverUs / n };
}

async function main(): Promise<void> {
  const connectOld =
    values.old === undefined
      ? connectNew
      : (
          (await import(pathToFileURL(resolve(values.old, 'src/index.js')).href)) as {
            connect: Connect;
          }
        ).connect;
  await drain(connectOld, 'warm');
  await drain(connectNew, 'warm', true);
  const ratios = { rate: [] as number[], client: [] as number[], server: [] as number[] };
  const show = (r: Run): string =>
    `${r.perSec.toFixed(0)}/s, client ${r.clientUs.toFixed(1)} µs, server ${r.serverUs.toFixed(1)} µs`;
  for (let round = 1; round <= rounds; round++) {
    const oldFirst = round % 2 === 1;
    const first = await drain(oldFirst ? connectOld : connectNew, 'a', !oldFirst);
    const second = await drain(oldFirst ? connectNew : connectOld, 'b', oldFirst);
    const [before, after] = oldFirst ? [first, second] : [second, first];
    ratios.rate.push(after.perSec / before.perSec);
    ratios.client.push(after.clientUs / before.clientUs);
    ratios.server.push(after.serverUs / before.serverUs);
    console.log(`round ${round}: old ${show(before)} | new ${show(after)} | new/old ${ratios.rate.at(-1)?.toFixed(3)}`);
  }
  const m = (xs: number[]): string => median(xs).toFixed(3);
  console.log(
    `median new/old (${n} messages, concurrency ${concurrency}, handler ${values['busy-us']} µs` +
      (resultBytes === null ? '' : `, new with a ${resultBytes}-byte result`) +
      '): ' +
      `rate ${m(ratios.rate)}, client CPU per message ${m(ratios.client)}` +
      (redis === null ? '' : `, server CPU per message ${m(ratios.server)}`),
  );
  redis?.disconnect();
}

await main();
