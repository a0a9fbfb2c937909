/**
 * `node --import tsx bench/postgres/trickle.ts [--store URL] [--delayed N] [--messages M] [--rate R]`
 *
 * A worker that keeps up, beside a backlog of delayed messages: a queue holds N messages delayed an hour
 * (default 100,000; 0 for none), then M messages (default 1,500) are enqueued one at a time at R a second
 * (default 500) to one worker at concurrency 64 that is idle between them, so nearly every claim finds fewer
 * ready messages than it asks. Prints the enqueue → handler latency (p50, p99) and the CPU every `postgres`
 * process of this machine spent per message meanwhile (read from /proc, so the server must run here). Run with
 * `--delayed 0` beside it to see what the delayed backlog costs each claim. The store is the URL given, else
 * $KVMQ_TEST_POSTGRES_URL, in a fresh schema dropped at the end
 * (`node scripts/servers.mjs run postgres -- node --import tsx bench/postgres/trickle.ts`).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { connect } from '../../src/index.js';
import { describeMachine, quantile, sleepUntil, whole } from '../common.js';
import { cpuByName, cpuSince } from '../process-cpu.js';
import { benchServerUrl, dropSchema } from './server.js';

const { values } = parseArgs({
  options: {
    store: { type: 'string' },
    delayed: { type: 'string', default: '100000' },
    messages: { type: 'string', default: '1500' },
    rate: { type: 'string', default: '500' },
  },
});
const base = benchServerUrl(values.store);
const delayed = Number(values.delayed);
const n = Number(values.messages);
const perSec = Number(values.rate);
const queue = 'trickle';
const schema = `kvmq_trickle_${process.pid}`;
const HOUR_MS = 3_600_000;

const client = await connect(`${base}?schema=${schema}`, { maintenance: false });
try {
  for (let sent = 0; sent < delayed; sent += 1000) {
    const count = Math.min(1000, delayed - sent);
    await client.enqueueBatch(
      queue,
      Array.from({ length: count }, (_, i) => ({ payload: { i: sent + i }, initialBackoffMs: HOUR_MS })),
    );
  }
  const latencies: number[] = [];
  const worker = client.worker(
    queue,
    (job) => {
      const sentAt = (job.payload as { sentAt?: number }).sentAt;
      if (sentAt !== undefined) latencies.push(performance.now() - sentAt);
    },
    { concurrency: 64 },
  );
  await sleep(500);
  const cpu = cpuByName('postgres');
  const started = performance.now();
  for (let i = 0; i < n; i++) {
    await sleepUntil(started + (i * 1000) / perSec);
    await client.enqueue(queue, { sentAt: performance.now() });
  }
  while (latencies.length < n) await sleep(10);
  const serverMs = cpuSince('postgres', cpu);
  await worker.stop();
  latencies.sort((a, b) => a - b);
  console.log(describeMachine());
  console.log(
    `${whole.format(delayed)} delayed, ${whole.format(n)} messages at ${whole.format(perSec)}/s to a worker at ` +
      `concurrency 64: latency p50 ${quantile(latencies, 0.5).toFixed(2)} ms, p99 ` +
      `${quantile(latencies, 0.99).toFixed(2)} ms; PostgreSQL CPU ${whole.format((serverMs * 1000) / n)} µs a message`,
  );
} finally {
  await client.close();
  await dropSchema(base, schema);
}
