/**
 * `node --import tsx bench/client-cpu.ts --store URL [--n N] [--rounds R]`
 *
 * Client CPU per message, phase by phase: this process's user + system CPU time while it makes N single
 * `client.enqueue` calls with 64 in flight (the peers bench's enqueue), then while one worker at concurrency
 * 64 with a no-op handler drains them (claim, decode, dispatch, finish), each divided by N. Prints one JSON
 * line per round and the medians. The store's server runs in another process (Redis, ZooKeeper, etcd), so the
 * figure is kvmq's JavaScript and its client library; SQLite runs in this process and its figure includes
 * SQLite's own work.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { connect } from '../src/index.js';
import { inFlight, signal } from './common.js';
import type { Client } from '../src/index.js';

const IN_FLIGHT = 64;
const CONCURRENCY = 64;

const { values } = parseArgs({
  options: {
    store: { type: 'string' },
    n: { type: 'string', default: '20000' },
    rounds: { type: 'string', default: '3' },
  },
});
const n = Number(values.n);
const rounds = Number(values.rounds);
const dir = mkdtempSync(join(tmpdir(), 'kvmq-client-cpu-'));
const url = values.store ?? `sqlite:${join(dir, 'bench.db')}`;

function cpuUs(since: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(since);
  return used.user + used.system;
}

async function round(client: Client, queue: string, count: number): Promise<{ enqueue: number; drain: number }> {
  let cpu = process.cpuUsage();
  await inFlight(count, IN_FLIGHT, (i) => client.enqueue(queue, { i }));
  const enqueue = cpuUs(cpu) / count;
  let handled = 0;
  const all = signal();
  cpu = process.cpuUsage();
  const worker = client.worker(
    queue,
    () => {
      handled += 1;
      if (handled === count) all.fire();
    },
    { concurrency: CONCURRENCY },
  );
  await all.promise;
  await worker.stop();
  return { enqueue, drain: cpuUs(cpu) / count };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
}

const client = await connect(url, { maintenance: false });
const stamp = Date.now().toString(36);
try {
  await round(client, `client-cpu-${stamp}-warm`, Math.max(1000, Math.round(n / 4)));
  const enqueue: number[] = [];
  const drain: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const figures = await round(client, `client-cpu-${stamp}-${r}`, n);
    enqueue.push(figures.enqueue);
    drain.push(figures.drain);
  }
  const line = {
    store: url.split(':')[0],
    n,
    enqueueUsPerMessage: Number(median(enqueue).toFixed(2)),
    drainUsPerMessage: Number(median(drain).toFixed(2)),
    rounds: { enqueue: enqueue.map((v) => Number(v.toFixed(2))), drain: drain.map((v) => Number(v.toFixed(2))) },
  };
  console.log(JSON.stringify(line));
} finally {
  await client.close();
  rmSync(dir, { recursive: true, force: true });
}
