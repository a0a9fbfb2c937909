/**
 * The conformance suite on a Redis Cluster of three masters: every queue's
 * keys share one hash slot (the `{queue}` tag), so each script runs on the
 * node that owns the queue, and the queues of one namespace spread over the nodes.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { connect } from '../src/index.js';
import { startCluster, type RedisCluster } from '../scripts/servers/redis.mjs';
import { conformance } from './conformance/index.js';
import { waitFor } from './support/wait.js';
import { storeOf } from '../src/client/client-store.js';
import { SCRIPT_FORMS } from '../src/stores/redis/script-sources.js';

const dir = mkdtempSync(join(tmpdir(), 'kvmq-redis-cluster-'));
let cluster: RedisCluster | null = null;
let counter = 0;

before(async () => {
  cluster = await startCluster(dir);
});

after(async () => {
  await cluster?.stop();
  rmSync(dir, { recursive: true, force: true });
});

function clusterUrl(): string {
  if (cluster === null) throw new Error('the Redis Cluster did not start');
  return cluster.url;
}

conformance({
  name: 'redis cluster',
  url() {
    return Promise.resolve(
      `${clusterUrl()}&prefix=kvmq-test-${process.pid}-${++counter}-${randomBytes(3).toString('hex')}`,
    );
  },
  capabilities: {
    maxPayloadBytes: 1024 * 1024,
    wakeups: true,
    instantRelease: false,
    deadLetterQueue: false,
    overlapClaims: true,
    flows: false,
  },
});

void test('redis cluster: the queues of one namespace live on different nodes, each whole on one', async () => {
  const client = await connect(`${clusterUrl()}&prefix=spread`, { maintenance: false });
  try {
    const queues = Array.from({ length: 12 }, (_, i) => `spread-${i}`);
    for (const q of queues) await client.enqueue(q, { q }, { id: 'm' });
    const holders = new Set<number>();
    for (const node of cluster?.nodes ?? []) {
      const keys = spawnSync('redis-cli', ['-p', String(node.port), 'KEYS', 'spread:*'], { encoding: 'utf8' })
        .stdout.split('\n')
        .filter(Boolean);
      if (keys.length > 0) holders.add(node.port);
      // A node holds every key of a queue or none of them.
      for (const q of queues) {
        const mine = keys.filter((k) => k.startsWith(`spread:{${q}}:`));
        assert.ok(mine.length === 0 || mine.includes(`spread:{${q}}:messages`), `${q} split across nodes`);
      }
    }
    assert.ok(holders.size >= 2, `12 queues all on ${holders.size} node`);
    for (const q of queues) assert.equal((await client.status(q, 'm'))?.state, 'queued');
    // Each node runs the queues it owns by the library's functions: every master has it.
    const library = SCRIPT_FORMS.library();
    for (const node of cluster?.nodes ?? []) {
      const role = spawnSync('redis-cli', ['-p', String(node.port), 'ROLE'], { encoding: 'utf8' }).stdout;
      if (!role.startsWith('master')) continue;
      const list = spawnSync('redis-cli', ['-p', String(node.port), 'FUNCTION', 'LIST', 'LIBRARYNAME', library.name], {
        encoding: 'utf8',
      }).stdout;
      assert.match(list, new RegExp(library.name), `node ${node.port} has no ${library.name}`);
    }
  } finally {
    await client.close();
  }
});

void test('redis cluster: a dead-letter queue is refused with an error that says why', async () => {
  const client = await connect(`${clusterUrl()}&prefix=dlq-refused`, { maintenance: false });
  try {
    await assert.rejects(client.configure('orders', { deadLetterQueue: 'orders-dead' }), (error: unknown) => {
      assert.ok(error instanceof TypeError, String(error));
      assert.match(error.message, /deadLetterQueue is not available on this redis store: .*hash slots/);
      return true;
    });
    assert.equal((await client.config('orders')).deadLetterQueue, null);
    // Every other field still configures.
    assert.equal((await client.configure('orders', { maxDeliveries: 3, deadLetterQueue: null })).maxDeliveries, 3);
  } finally {
    await client.close();
  }
});

void test('redis cluster: queues(), events and turns of queues on every node', async () => {
  const client = await connect(`${clusterUrl()}&prefix=events-spread`, { maintenance: false });
  try {
    const queues = Array.from({ length: 12 }, (_, i) => `ev-${String(i).padStart(2, '0')}`);
    for (const q of queues) {
      await client.configure(q, { events: true });
      await client.enqueue(q, { q }, { id: 'm' });
    }
    // The registry is one set outside every queue's slot; each queue's events live in its own slot.
    assert.deepEqual(await client.queues(), queues);
    for (const q of queues) {
      const page = await client.readEvents(q);
      assert.deepEqual(
        page.events.map((e) => [e.type, e.id, e.cursor]),
        [['enqueued', 'm', '1']],
      );
      assert.equal(await storeOf(client).takeTurn(q, 'gc-warning', 60_000), true);
      assert.equal(await storeOf(client).takeTurn(q, 'gc-warning', 60_000), false);
    }
    let calls = 0;
    const stop = storeOf(client).subscribeEvents(queues[0] ?? '', () => (calls += 1));
    await waitFor(() => calls > 0, { what: 'the call at subscription' });
    calls = 0;
    await client.enqueue(queues[0] ?? '', 'again');
    await waitFor(() => calls > 0, { what: 'a call after an event on a cluster' });
    stop();
    await client.clear(...queues);
  } finally {
    await client.close();
  }
});

void test('redis cluster: single enqueues of several queues, 64 in flight, are claimed in the order made', async () => {
  const client = await connect(`${clusterUrl()}&prefix=order-${randomBytes(3).toString('hex')}`, {
    maintenance: false,
  });
  try {
    // Calls of ENQUEUE_CALL_MESSAGES each, several in flight per queue, each queue on its own node's connection.
    const queues = ['order-a', 'order-b', 'order-c', 'order-d'];
    const n = 1000;
    let next = 0;
    const lane = async (): Promise<void> => {
      while (next < n) {
        const i = next++;
        await client.enqueue(queues[i % queues.length] ?? '', i, { id: String(i) });
      }
    };
    await Promise.all(Array.from({ length: 64 }, lane));
    for (const [k, q] of queues.entries()) {
      const ids: string[] = [];
      const request = { consumerId: 'c', max: 100, lockMs: 60_000, accepts: null, eoqBackoffMs: () => 1000 };
      for (let got = await storeOf(client).claim(q, request); got.messages.length > 0;) {
        for (const m of got.messages) ids.push(m.id);
        got = await storeOf(client).claim(q, request);
      }
      const made = Array.from({ length: n }, (_, i) => i).filter((i) => i % queues.length === k);
      assert.deepEqual(ids, made.map(String), q);
    }
    await client.clear(...queues);
  } finally {
    await client.close();
  }
});
