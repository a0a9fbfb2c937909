/**
 * A worker started while its store's server is down, on every network store (Redis, ZooKeeper, etcd, kvmq serve,
 * PostgreSQL):
 * start() resolves, each failure goes to onError, and once the server is back the worker handles every message.
 * Each test runs a server of its own (it stops it), on the same port and data before and after.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { Redis } from 'ioredis';
import {
  connect,
  KvmqError,
  type Client,
  type Handler,
  type QueueStatus,
  type Worker,
  type WorkerOptions,
} from '../src/index.js';
import { start as startRedis } from '../scripts/servers/redis.mjs';
import { start as startZookeeper } from '../scripts/servers/zookeeper.mjs';
import { start as startEtcd } from '../scripts/servers/etcd.mjs';
import { start as startPostgres } from '../scripts/servers/postgres.mjs';
import { startServe } from './fixtures/serve-support.js';
import { freshStoreUrl } from './fixtures/zookeeper-env.js';
import { gatedHandlers, timedStop } from './support/gate.js';
import { uniqueQueue } from './support/names.js';
import { waitFor } from './support/wait.js';

/** A server a test can stop and start again, same address, same data. */
interface Outage {
  readonly url: string;
  down(): Promise<void>;
  up(): Promise<void>;
  close(): Promise<void>;
  /** The names of kvmq's connections the server holds, where it can tell (Redis's CLIENT LIST). */
  kvmqConnections?(): Promise<string[]>;
}

/** A server started in a temp dir of its own, which close() stops and removes. */
async function inTempDir<S extends { stop(): Promise<void> }>(
  label: string,
  start: (dir: string) => Promise<S>,
  controls: (server: S) => Omit<Outage, 'close'> | Promise<Omit<Outage, 'close'>>,
): Promise<Outage> {
  const dir = mkdtempSync(join(tmpdir(), `kvmq-outage-${label}-`));
  const server = await start(dir);
  return {
    ...(await controls(server)),
    close: async () => {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const SERVERS: Record<string, () => Promise<Outage>> = {
  redis: () =>
    inTempDir('redis', startRedis, (server) => ({
      url: server.url,
      down: () => server.kill('SIGTERM'),
      up: () => server.restart(),
      async kvmqConnections() {
        const redis = new Redis(server.url);
        try {
          const list = await redis.client('LIST');
          return [...String(list).matchAll(/ name=(kvmq\S*)/g)].map((match) => match[1] ?? '');
        } finally {
          redis.disconnect();
        }
      },
    })),
  zookeeper: () =>
    inTempDir('zookeeper', startZookeeper, async (server) => ({
      url: await freshStoreUrl(server.url),
      down: () => server.ensemble.stopNode(0),
      up: () => server.ensemble.startNode(0),
    })),
  etcd: () =>
    inTempDir('etcd', startEtcd, (server) => ({
      url: `${server.url}/outage`,
      down: () => server.stop(),
      up: () => server.restart(),
    })),
  postgres: () =>
    inTempDir('postgres', startPostgres, (server) => ({
      url: `${server.url}?schema=outage`,
      // A fast shutdown: PostgreSQL's default (SIGTERM) would wait for every client to leave.
      down: () => server.stop(),
      up: () => server.restart(),
    })),
  async serve() {
    const server = await startServe();
    return {
      url: `etcd://${server.endpoint}/outage`,
      down: () => server.kill('SIGTERM'),
      up: () => server.restart(),
      close: () => server.stop(),
    };
  },
};

/** A server of the test's own, a client on it and a queue of `count` messages m0, m1, ... */
async function setUp(t: TestContext, open: () => Promise<Outage>, count: number) {
  const server = await open();
  // The client's own background work (producer GC) may fail while the server is down: not under test here.
  const client = await connect(server.url, { onError: () => undefined });
  const workers: Worker[] = [];
  // In this order: a client closed after its server would wait on it.
  t.after(async () => {
    await Promise.all(workers.map((worker) => Promise.all([worker.stop(), worker.stop()])));
    await client.close();
    await server.close();
  });
  const queue = uniqueQueue('outage');
  const items = Array.from({ length: count }, (_, i) => ({ payload: i, id: `m${i}` }));
  const ids = (await client.enqueueBatch(queue, items)).map((result) => result.id);
  /** A worker of the test, force-stopped after it. */
  const worker = (handler: Handler, options: WorkerOptions): Worker => {
    const made = client.worker(queue, handler, options);
    workers.push(made);
    return made;
  };
  return { server, client, queue, ids, worker };
}

/** Waits until every message is done: handled by the workers, and its outcome stored. */
async function allDone(client: Client, queue: string, count: number): Promise<void> {
  // The client may not have reconnected yet: a transient error is one more wait.
  const done = (status: QueueStatus | null): boolean => status?.counts['done-awaiting-gc'] === count;
  await waitFor(async () => done(await client.queueStatus(queue).catch(unlessTransient)), {
    timeoutMs: 60_000,
    what: `${count} messages done`,
  });
}

function unlessTransient(error: unknown): null {
  if (error instanceof KvmqError && error.transient) return null;
  throw error;
}

function transientOnly(errors: readonly unknown[]): void {
  for (const error of errors) {
    assert.ok(error instanceof KvmqError && error.transient, `not a transient store error: ${String(error)}`);
  }
}

const STOP_GRACE_MS = 1000;

for (const [name, open] of Object.entries(SERVERS)) {
  void test(
    `${name}: a worker started while the server is down handles every message once it is back`,
    { timeout: 120_000 },
    async (t) => {
      const { server, client, queue, ids, worker: newWorker } = await setUp(t, open, 50);
      await server.down();
      const errors: unknown[] = [];
      const handled = new Set<string>();
      const worker = newWorker((job) => void handled.add(job.id), {
        autoStart: false,
        eoqBackoffMs: 50,
        onError: (error) => errors.push(error),
      });
      const started = worker.start();
      await waitFor(() => errors.length >= 1, {
        timeoutMs: 30_000,
        what: 'a failure reported while the server is down',
      });
      await started;
      assert.equal(worker.running, true);
      transientOnly(errors);

      await server.up();
      await allDone(client, queue, ids.length);
      assert.ok(
        ids.every((id) => handled.has(id)),
        `handled ${handled.size} of ${ids.length}`,
      );
      await worker.stop();
      assert.equal(worker.running, false);
    },
  );

  void test(
    `${name}: a worker running when the server goes down returns from stop() within stopGraceMs`,
    { timeout: 120_000 },
    async (t) => {
      const { server, client, queue, ids, worker } = await setUp(t, open, 10);
      const errors: unknown[] = [];
      const gated = gatedHandlers();
      const options = {
        concurrency: 3,
        lockMs: 2000,
        eoqBackoffMs: 50,
        onError: (error: unknown) => errors.push(error),
      };
      const first = worker(gated.handler, { ...options, stopGraceMs: STOP_GRACE_MS });
      await waitFor(() => gated.started() === 3, { timeoutMs: 15_000, what: 'three handlers running' });
      await server.down();
      gated.release();
      const stopMs = await timedStop(first, 1);
      // Generous: what matters is that it returns at all, not after the store's own timeouts.
      assert.ok(stopMs < STOP_GRACE_MS + 5000, `stop() took ${Math.round(stopMs)} ms`);
      assert.ok(
        errors.some((error) => /stopped without storing the outcome of [1-3] message\(s\)/.test(String(error))),
        errors.map(String).join('\n'),
      );
      transientOnly(errors);

      await server.up();
      // The messages the first worker left: handled again once their locks end, unless the store still took the
      // finishes it had been sent.
      worker(() => undefined, { ...options, onError: () => undefined });
      await allDone(client, queue, ids.length);
    },
  );

  void test(
    `${name}: a client closed while its server is down returns within a bound`,
    { timeout: 120_000 },
    async (t) => {
      const { server, client, queue, ids, worker } = await setUp(t, open, 3);
      const handled = new Set<string>();
      const running = worker((job) => void handled.add(job.id), { eoqBackoffMs: 50, stopGraceMs: STOP_GRACE_MS });
      await waitFor(() => handled.size === ids.length, { timeoutMs: 15_000, what: 'every message handled' });
      await client.enqueue(queue, 'wake').catch(unlessTransient);
      await server.down();
      try {
        await timedStop(running, 1);
        const began = performance.now();
        await client.close();
        const closeMs = performance.now() - began;
        // Generous: what matters is that it returns at all (it waited for the server before).
        assert.ok(closeMs < 10_000, `close() took ${Math.round(closeMs)} ms`);
      } finally {
        await server.up();
      }
      // Nothing of the closed client comes back with the server (a connection that did would keep the process up),
      // not even for a while: a worker's stop gives up on the store before its handoff connection is closed.
      const watchUntil = performance.now() + 3000;
      while (performance.now() < watchUntil) {
        assert.deepEqual((await server.kvmqConnections?.()) ?? [], []);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
  );
}
