/**
 * `node --import tsx bench/cpu.ts --store URL [--n N] [--concurrency C]`
 *
 * Client CPU per message: this process's user + system CPU time while it enqueues N messages (batched) and
 * one worker with a no-op handler claims and finishes them, divided by N. A Redis or ZooKeeper server runs
 * elsewhere, so the figure is kvmq's own JavaScript (and the client library); SQLite runs in this process,
 * so its figure includes SQLite's work.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { connect } from '../src/index.js';
import { fill, signal } from './common.js';

const { values } = parseArgs({
  options: {
    store: { type: 'string' },
    n: { type: 'string', default: '50000' },
    concurrency: { type: 'string', default: '64' },
  },
});
const n = Number(values.n);
const concurrency = Number(values.concurrency);
const dir = mkdtempSync(join(tmpdir(), 'kvmq-cpu-'));
const url = values.store ?? `sqlite:${join(dir, 'bench.db')}`;
const client = await connect(url);
const queue = `cpu-${Date.now()}`;

async function once(q: string, count: number): Promise<{ cpuUs: number; ms: number }> {
  let handled = 0;
  const allHandled = signal();
  const cpu = process.cpuUsage();
  const start = performance.now();
  const worker = client.worker(
    q,
    () => {
      handled += 1;
      if (handled === count) allHandled.fire();
    },
    { concurrency },
  );
  await fill(client, q, count, 1000);
  await allHandled.promise;
  await worker.stop();
  const used = process.cpuUsage(cpu);
  return { cpuUs: used.user + used.system, ms: performance.now() - start };
}

try {
  await once(`${queue}-warm`, Math.max(1000, Math.round(n / 10)));
  const { cpuUs, ms } = await once(queue, n);
  const line = {
    store: url.split(':')[0],
    n,
    concurrency,
    cpuUsPerMessage: Number((cpuUs / n).toFixed(2)),
    perSec: Math.round((n * 1000) / ms),
  };
  console.log(JSON.stringify(line));
} finally {
  await client.close();
  rmSync(dir, { recursive: true, force: true });
}
