/**
 * Failures on etcd: the dispatcher's process killed mid-stream (another takes over), a consumer's process
 * killed (its deliveries go elsewhere), etcd itself killed and restarted, and the leader of a 3-member
 * cluster killed. Every accepted message is handled (at least once) and ends done.
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { connect, type Client, type Worker } from '../src/index.js';
import { spawnChild, type Child } from './support/child.js';
import { waitFor } from './support/wait.js';
import { isolatedUrl, startEtcd, startEtcdCluster } from './fixtures/etcd-support.js';
import { EtcdStore } from '../src/etcd/store.js';

const cleanups: (() => Promise<void> | void)[] = [];
after(async () => {
  for (const fn of cleanups.reverse()) await fn();
});

function spawn(script: string, args: string[]): Child {
  const child = spawnChild(script, args);
  cleanups.push(async () => {
    await child.kill('SIGKILL');
  });
  return child;
}

async function open(url: string, errors: unknown[] = []): Promise<Client> {
  const client = await connect(url, { maintenance: false, onError: (e) => errors.push(e) });
  cleanups.push(() => client.close());
  return client;
}

/** Enqueues `n` messages in batches, retrying a batch that failed (etcd down) until the store takes it. */
async function produce(client: Client, queue: string, n: number, batch: number, pauseMs: number): Promise<string[]> {
  const accepted: string[] = [];
  for (let i = 0; i < n; i += batch) {
    const items = Array.from({ length: Math.min(batch, n - i) }, (_, j) => ({
      payload: { i: i + j },
      id: `m${i + j}`,
    }));
    for (;;) {
      try {
        const results = await client.enqueueBatch(queue, items);
        // A retried batch may find its own messages already in (refused as existing): they were accepted.
        for (const r of results) accepted.push(r.id);
        break;
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
    if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
  }
  return accepted;
}

/** A worker that records every id it handles (duplicates too). */
function recorder(client: Client, queue: string, errors: unknown[]): { handled: Map<string, number>; worker: Worker } {
  const handled = new Map<string, number>();
  const worker = client.worker(
    queue,
    (job) => {
      handled.set(job.id, (handled.get(job.id) ?? 0) + 1);
    },
    { concurrency: 8, lockMs: 10_000, eoqBackoffMs: 100, onError: (e) => errors.push(e) },
  );
  cleanups.push(() => worker.stop());
  return { handled, worker };
}

async function allDone(client: Client, queue: string, ids: readonly string[], timeoutMs: number): Promise<void> {
  await waitFor(async () => (await client.queueStatus(queue)).counts['done-awaiting-gc'] === ids.length, {
    timeoutMs,
    intervalMs: 200,
    what: `${ids.length} messages done`,
  });
}

void describe('etcd failover', () => {
  void test(
    'the dispatcher process killed mid-stream: another process takes over, every message is handled',
    { timeout: 90_000 },
    async () => {
      const url = isolatedUrl('?leaseTtlMs=2000');
      const q = 'takeover';
      const other = spawn('etcd-dispatcher.ts', [url, q]);
      await other.line(/^dispatching takeover$/);
      const errors: unknown[] = [];
      const client = await open(url, errors);
      const { handled } = recorder(client, q, errors);
      const store = client.store;
      assert.ok(store instanceof EtcdStore);
      assert.equal(store.host.dispatching(q), false, 'the other process dispatches');

      const producing = produce(client, q, 1500, 25, 5);
      await waitFor(() => handled.size >= 300, { timeoutMs: 30_000, what: () => `300 handled (${handled.size})` });
      assert.equal((await other.kill('SIGKILL')).signal, 'SIGKILL');
      const accepted = await producing;
      await waitFor(() => accepted.every((id) => handled.has(id)), {
        timeoutMs: 40_000,
        intervalMs: 100,
        what: () => `every accepted message handled (${accepted.filter((id) => !handled.has(id)).length} missing)`,
      });
      assert.equal(store.host.dispatching(q), true, 'this process took over');
      await allDone(client, q, accepted, 20_000);
      const twice = [...handled.values()].filter((n) => n > 1).length;
      assert.ok(twice <= 64, `${twice} messages handled twice: at most what was in flight`);
    },
  );

  void test('a consumer process killed: what it held goes to another consumer', { timeout: 60_000 }, async () => {
    const url = isolatedUrl('?leaseTtlMs=2000');
    const q = 'consumer-killed';
    const errors: unknown[] = [];
    const client = await open(url, errors);
    const child = spawn('worker-process.ts', [url, q, 'hang', '30000']);
    await child.line(/^ready \S+$/);
    await client.enqueueBatch(
      q,
      ['a', 'b', 'c', 'd', 'e'].map((id) => ({ payload: id, id })),
    );
    const [, held] = (await child.line(/^claimed (\S+) 1$/)) as unknown as [string, string];
    await child.kill('SIGKILL');
    const { handled } = recorder(client, q, errors);
    await waitFor(() => handled.size === 5, {
      timeoutMs: 20_000,
      what: () => `five handled (${[...handled.keys()].join(',')})`,
    });
    const status = await client.status(q, held);
    assert.equal(status?.state, 'done-awaiting-gc');
    assert.equal(status.attempt, 2, `${held} was handed out twice: once to the killed process`);
  });

  void test('etcd killed and restarted mid-stream: nothing accepted is lost', { timeout: 120_000 }, async () => {
    const { node, cleanup } = await startEtcd();
    cleanups.push(cleanup);
    const url = `${node.url}/restart?leaseTtlMs=2000`;
    const q = 'restart';
    const errors: unknown[] = [];
    const client = await open(url, errors);
    const { handled } = recorder(client, q, errors);
    const producing = produce(client, q, 800, 20, 10);
    await waitFor(() => handled.size >= 150, { timeoutMs: 30_000, what: () => `150 handled (${handled.size})` });
    await node.kill('SIGKILL');
    await new Promise((resolve) => setTimeout(resolve, 1000));
    await node.restart();
    const accepted = await producing;
    await waitFor(() => accepted.every((id) => handled.has(id)), {
      timeoutMs: 60_000,
      intervalMs: 200,
      what: () => `every accepted message handled (${accepted.filter((id) => !handled.has(id)).length} missing)`,
    });
    await allDone(client, q, accepted, 30_000);
    assert.ok(errors.length > 0, 'the worker saw etcd go away (and recovered)');
  });

  // Known failure: after the leader is killed some accepted messages are not handled within the wait (issue 5).
  void test(
    'a 3-member cluster losing its leader keeps the queue working',
    { timeout: 120_000, todo: 'some accepted messages go unhandled after the leader dies' },
    async () => {
      const { cluster, cleanup } = await startEtcdCluster(3);
      cleanups.push(cleanup);
      const url = `${cluster.url}/cluster?leaseTtlMs=3000`;
      const q = 'cluster';
      const errors: unknown[] = [];
      const client = await open(url, errors);
      const { handled } = recorder(client, q, errors);
      const producing = produce(client, q, 800, 20, 10);
      await waitFor(() => handled.size >= 150, { timeoutMs: 30_000, what: () => `150 handled (${handled.size})` });
      const leader = await cluster.leader();
      await leader.kill('SIGKILL');
      const accepted = await producing;
      await waitFor(() => accepted.every((id) => handled.has(id)), {
        timeoutMs: 60_000,
        intervalMs: 200,
        what: () => `every accepted message handled (${accepted.filter((id) => !handled.has(id)).length} missing)`,
      });
      // The queue still works with two members: a new message goes through.
      await client.enqueue(q, 'after', { id: 'after' });
      await waitFor(() => handled.has('after'), { timeoutMs: 20_000, what: 'a message after the failover' });
      await allDone(client, q, [...accepted, 'after'], 30_000);
    },
  );
});
