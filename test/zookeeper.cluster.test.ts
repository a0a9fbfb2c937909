/**
 * ZooKeeper servers that go away: a standalone server restarted mid-run, and a 3-node ensemble losing a
 * node. Each test starts its own servers (scripts/servers/zookeeper.mjs) and stops them.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { connect, type Client, type Worker } from '../src/index.js';
import { startEnsemble, type Ensemble } from '../scripts/servers/zookeeper.mjs';
import { freshStoreUrl } from './fixtures/zookeeper-env.js';
import { waitFor } from './support/wait.js';

const cleanups: (() => Promise<void> | void)[] = [];
after(async () => {
  for (const fn of cleanups.reverse()) await fn();
});

async function ensemble(n: number): Promise<Ensemble> {
  const dir = mkdtempSync(join(tmpdir(), 'kvmq-zk-cluster-'));
  const started = await startEnsemble(dir, n);
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  cleanups.push(() => started.stop());
  return started;
}

async function open(url: string): Promise<Client> {
  const client = await connect(url, { maintenance: false, onError: () => undefined });
  cleanups.push(() => client.close());
  return client;
}

/**
 * Enqueues one message at a time until `stop()`, retrying failed enqueues (a failure is not an accept);
 * returns the ids ZooKeeper accepted.
 */
function produce(client: Client, queue: string): { accepted: Set<string>; stop: () => Promise<void> } {
  const accepted = new Set<string>();
  let running = true;
  let n = 0;
  const loop = (async () => {
    while (running) {
      const id = `m${n}`;
      try {
        const result = await client.enqueue(queue, { n }, { id });
        if (result.ok) accepted.add(id);
        n += 1;
      } catch {
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  })();
  return {
    accepted,
    stop: async () => {
      running = false;
      await loop;
    },
  };
}

function consume(client: Client, queue: string): { handled: Set<string>; worker: Worker } {
  const handled = new Set<string>();
  const worker = client.worker(
    queue,
    (job) => {
      handled.add(job.id);
    },
    { concurrency: 4, eoqBackoffMs: 100, lockMs: 5000, onError: () => undefined },
  );
  return { handled, worker };
}

async function allHandled(accepted: Set<string>, handled: Set<string>): Promise<void> {
  await waitFor(() => [...accepted].every((id) => handled.has(id)), {
    timeoutMs: 60_000,
    what: () =>
      `every accepted message handled (missing: ${[...accepted]
        .filter((id) => !handled.has(id))
        .slice(0, 10)
        .join(',')})`,
  });
}

describe('zookeeper: servers that go away', { timeout: 180_000 }, () => {
  test('ZooKeeper restarted mid-run: every accepted message is handled', async () => {
    const zk = await ensemble(1);
    const url = await freshStoreUrl(zk.url);
    const producer = produce(await open(url), 'restart');
    const { handled, worker } = consume(await open(url), 'restart');
    await waitFor(() => handled.size >= 50, { what: '50 handled before the restart', timeoutMs: 30_000 });
    await zk.stopNode(0);
    await new Promise((r) => setTimeout(r, 500));
    await zk.startNode(0);
    const before = producer.accepted.size;
    await waitFor(() => producer.accepted.size >= before + 50, {
      what: '50 accepted after the restart',
      timeoutMs: 30_000,
    });
    await producer.stop();
    await allHandled(producer.accepted, handled);
    await worker.stop();
  });

  test('a 3-node ensemble with one node killed keeps the queue working', async () => {
    const zk = await ensemble(3);
    const url = await freshStoreUrl(zk.url);
    const producer = produce(await open(url), 'ensemble');
    const { handled, worker } = consume(await open(url), 'ensemble');
    await waitFor(() => handled.size >= 50, { what: '50 handled with 3 nodes', timeoutMs: 30_000 });
    await zk.killNode(0);
    const before = producer.accepted.size;
    const handledBefore = handled.size;
    await waitFor(() => producer.accepted.size >= before + 100 && handled.size >= handledBefore + 100, {
      what: '100 more accepted and handled with a node down',
      timeoutMs: 60_000,
    });
    await producer.stop();
    await allHandled(producer.accepted, handled);
    assert.ok(handled.size >= producer.accepted.size);
    await worker.stop();
  });
});
