/**
 * The etcds protocol with the real etcdctl: plain producers put one key, plain consumers register on a
 * lease, watch their prefix and delete each delivery; kvmq's producer and worker speak the same keys.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Client } from '../src/index.js';
import { spawnChild, type Child } from './support/child.js';
import { JobLog, waitForStatus } from './support/jobs.js';
import { waitFor } from './support/wait.js';
import { closedAfterAll, endpointsOf, etcdctl, EtcdctlConsumer, isolatedUrl } from './fixtures/etcd-support.js';
import { queueRegistry } from '../src/stores/etcd/keys.js';

const TIMEOUT_MS = 60_000;
const IDX = /^\d{19}$/;

const opened = closedAfterAll();

/** A fresh namespace: its URL (short leases for quick takeovers), endpoints and key prefix. */
function namespace(): { url: string; endpoints: string; prefix: string } {
  const url = isolatedUrl('?leaseTtlMs=2000');
  const prefix = /\/t-[0-9a-f]+/.exec(url)?.[0] ?? '';
  return { url, endpoints: endpointsOf(url), prefix };
}

const client = (url: string): Promise<Client> => opened.client(url);

function consumer(...args: Parameters<typeof EtcdctlConsumer.start>): Promise<EtcdctlConsumer> {
  return EtcdctlConsumer.start(...args).then((c) => {
    opened.add(() => c.stop());
    return c;
  });
}

async function dispatcher(url: string, queue: string): Promise<Child> {
  const child = spawnChild('etcd-dispatcher.ts', [url, queue]);
  opened.add(async () => {
    await child.kill('SIGKILL');
  });
  await child.line(new RegExp(`^dispatching ${queue}$`));
  return child;
}

async function put(endpoints: string, key: string, value: string): Promise<void> {
  const res = await etcdctl(endpoints, ['put', key, value]);
  assert.equal(res.code, 0, res.stderr);
}

void describe('etcd protocol with etcdctl', () => {
  void test(
    'plain producers and plain consumers, in both key forms, through a dispatcher',
    { timeout: TIMEOUT_MS },
    async () => {
      const { url, endpoints, prefix } = namespace();
      await dispatcher(url, 'jobs');
      const a = await consumer(endpoints, `${prefix}/queue/jobs/consumer/a`, 'host-a');
      const b = await consumer(endpoints, `${prefix}/q/jobs/c/b`, '{"host":"host-b","capacity":2}');
      const ids = ['p1', 'p2', 'p3', 's1', 's2', 's3'];
      for (const id of ids.slice(0, 3)) await put(endpoints, `${prefix}/queue/jobs/producer/${id}`, `payload ${id}`);
      for (const id of ids.slice(3)) await put(endpoints, `${prefix}/q/jobs/p/${id}`, `payload ${id}`);

      // Each consumer acks what it is given, one etcdctl del at a time.
      const acked: string[] = [];
      await waitFor(
        async () => {
          for (const c of [a, b]) {
            for (const [key, value] of [...c.deliveries]) {
              const id = EtcdctlConsumer.idOf(key);
              assert.equal(value.toString(), `payload ${id}`);
              assert.match(key.slice(c.key.length + 1, -id.length - 1), IDX);
              await c.ack(key);
              acked.push(id);
            }
          }
          return acked.length >= ids.length;
        },
        { timeoutMs: 30_000, what: () => `every message acked (acked ${JSON.stringify(acked)})` },
      );
      assert.deepEqual([...acked].sort(), [...ids].sort());
      assert.ok(
        a.seen.length > 0 && b.seen.length > 0,
        `both consumers got work: a ${a.seen.length}, b ${b.seen.length}`,
      );

      const kvmq = await client(url);
      for (const id of ids) {
        const status = await waitForStatus(kvmq, 'jobs', id, 'done-awaiting-gc');
        assert.equal(status.outcome, 'success');
        assert.equal(status.attempt, 1);
      }
      // Nothing left in the ordered queue, the producer keys or the deliveries: only records (and the GC index,
      // and the queue's entry in the registry of queues).
      const left = (await etcdctl(endpoints, ['get', '--prefix', '--keys-only', `${prefix}/`])).stdout
        .split('\n')
        .filter(
          (k) =>
            k !== '' &&
            !k.includes('/kvmq/') &&
            !k.startsWith(queueRegistry(prefix)) &&
            !/\/(consumer|c)\/[^/]+$/.test(k) &&
            k !== `${prefix}/queue/jobs`,
        );
      assert.deepEqual(left, []);
    },
  );

  void test(
    'kvmq producer to an etcdctl consumer: the value is the payload; a delete acks exactly that message',
    { timeout: TIMEOUT_MS },
    async () => {
      const { url, endpoints, prefix } = namespace();
      await dispatcher(url, 'acks');
      const c = await consumer(endpoints, `${prefix}/queue/acks/consumer/c`, '{"capacity":2}');
      const kvmq = await client(url);
      await kvmq.enqueue('acks', 'one', { id: 'm1' });
      await kvmq.enqueue('acks', Buffer.from('two'), { id: 'm2' });
      await waitFor(() => c.deliveries.size === 2, { timeoutMs: 15_000, what: 'two deliveries' });
      const byId = new Map([...c.deliveries].map(([key, value]) => [EtcdctlConsumer.idOf(key), { key, value }]));
      assert.equal(byId.get('m1')?.value.toString(), '"one"', 'a JSON payload arrives as its JSON text');
      assert.equal(byId.get('m2')?.value.toString(), 'two', 'bytes arrive as they are');

      const m2 = byId.get('m2');
      assert.ok(m2);
      await c.ack(m2.key);
      const done = await waitForStatus(kvmq, 'acks', 'm2', 'done-awaiting-gc');
      assert.equal(done.outcome, 'success');
      // The later ack did not take the earlier message with it.
      const m1 = await kvmq.status('acks', 'm1');
      assert.equal(m1?.state, 'locked');
      assert.equal(m1.consumer, 'c');
      const m1Key = byId.get('m1')?.key;
      assert.ok(m1Key !== undefined);
      await c.ack(m1Key);
      await waitForStatus(kvmq, 'acks', 'm1', 'done-awaiting-gc');
    },
  );

  void test(
    'etcdctl producer to a kvmq worker: bytes, and the layout of the queue',
    { timeout: TIMEOUT_MS },
    async () => {
      const { url, endpoints, prefix } = namespace();
      const kvmq = await client(url);
      // kvmq's producer writes straight into the ordered queue, beside the message's record and its count slot.
      await kvmq.enqueue('layout', { n: 1 }, { id: 'k1' });
      const keys = (await etcdctl(endpoints, ['get', '--prefix', '--keys-only', `${prefix}/queue/layout/`])).stdout
        .split('\n')
        .filter((line) => line !== '');
      assert.equal(keys.length, 3, keys.join(', '));
      assert.ok(keys.some((k) => k.startsWith(`${prefix}/queue/layout/kvmq/counts/`)));
      const ordered = keys.find((k) => k.endsWith('/k1') && !k.includes('/kvmq/'));
      assert.ok(ordered !== undefined);
      assert.match(ordered.slice(`${prefix}/queue/layout/`.length), /^\d{19}\/k1$/);
      assert.ok(keys.includes(`${prefix}/queue/layout/kvmq/msg/k1`));
      assert.equal((await etcdctl(endpoints, ['get', '--print-value-only', ordered])).stdout.trim(), '{"n":1}');

      const log = new JobLog();
      const worker = kvmq.worker('layout', (job) => log.record(job), { concurrency: 2 });
      await log.handled('k1');
      await put(endpoints, `${prefix}/queue/layout/producer/plain-1`, 'raw bytes');
      const plain = await log.handled('plain-1', 1, { timeoutMs: 15_000 });
      assert.ok(Buffer.isBuffer(plain.payload));
      assert.equal(plain.payload.toString(), 'raw bytes');
      assert.deepEqual(plain.job.metadata, {});
      assert.deepEqual(plain.job.filters, {});

      // The dispatcher holds /queue/{q}: its value is the node id of a kvmq process.
      const holder = await etcdctl(endpoints, ['get', '--print-value-only', `${prefix}/queue/layout`]);
      assert.match(holder.stdout.trim(), /^[^:]+:\d+:[0-9a-f]{8}$/);
      // The worker's registration is on a lease, with what the dispatcher needs to choose it.
      const registration = await etcdctl(endpoints, [
        'get',
        '--print-value-only',
        `${prefix}/queue/layout/consumer/${worker.id}`,
      ]);
      const value = JSON.parse(registration.stdout) as { kvmq: number; capacity: number; envelope: boolean };
      assert.equal(value.kvmq, 1);
      assert.equal(value.envelope, true);
      assert.equal(value.capacity, 2);
      await worker.stop();
      const gone = await etcdctl(endpoints, ['get', '--keys-only', `${prefix}/queue/layout/consumer/${worker.id}`]);
      assert.equal(gone.stdout.trim(), '');
    },
  );

  void test(
    'a plain consumer whose lease ends has its deliveries given to another',
    { timeout: TIMEOUT_MS },
    async () => {
      const { url, endpoints, prefix } = namespace();
      await dispatcher(url, 'lapse');
      const dying = await consumer(endpoints, `${prefix}/queue/lapse/consumer/dying`, '{"capacity":3}', {
        ttlSeconds: 2,
        keepAlive: false,
      });
      const kvmq = await client(url);
      await kvmq.enqueueBatch(
        'lapse',
        ['a', 'b', 'c'].map((id) => ({ payload: id, id })),
      );
      await waitFor(() => dying.deliveries.size === 3, {
        timeoutMs: 15_000,
        what: 'three deliveries to the first consumer',
      });
      // It never acks and its lease is not kept alive: etcd drops its registration, the dispatcher moves its deliveries.
      const heir = await consumer(endpoints, `${prefix}/queue/lapse/consumer/heir`, '{"capacity":3}');
      await waitFor(() => heir.deliveries.size === 3, {
        timeoutMs: 20_000,
        what: 'the deliveries to move to the heir',
      });
      // The removals reach the first consumer on its own watch, which may come after the heir's.
      await waitFor(() => dying.deliveries.size === 0, {
        timeoutMs: 10_000,
        what: () => `the old deliveries to be removed (${dying.deliveries.size} left)`,
      });
      for (const key of [...heir.deliveries.keys()]) await heir.ack(key);
      for (const id of ['a', 'b', 'c']) {
        const status = await waitForStatus(kvmq, 'lapse', id, 'done-awaiting-gc');
        assert.equal(status.attempt, 2, `${id} was delivered twice`);
      }
    },
  );

  void test('consumers are chosen by the filters their registration carries', { timeout: TIMEOUT_MS }, async () => {
    const { url, endpoints, prefix } = namespace();
    const kvmq = await client(url);
    await kvmq.configure('filtered', { filterEnums: { performance_class: ['low', 'standard', 'high'] } });
    await dispatcher(url, 'filtered');
    const standard = await consumer(
      endpoints,
      `${prefix}/queue/filtered/consumer/standard`,
      '{"capacity":10,"filters":{"performance_class":{"value":"standard","method":"at_least"}}}',
    );
    const high = await consumer(
      endpoints,
      `${prefix}/queue/filtered/consumer/high`,
      '{"capacity":10,"filters":{"performance_class":"high"}}',
    );
    for (const value of ['low', 'standard', 'high']) {
      await kvmq.enqueue('filtered', value, { id: value, filters: { performance_class: value } });
    }
    await kvmq.enqueue('filtered', 'plain', { id: 'plain' });
    const got = (c: EtcdctlConsumer): string[] => c.seen.map((key) => EtcdctlConsumer.idOf(key)).sort();
    await waitFor(() => standard.seen.length + high.seen.length === 4, {
      timeoutMs: 15_000,
      what: () => `four deliveries (standard ${JSON.stringify(got(standard))}, high ${JSON.stringify(got(high))})`,
    });
    assert.ok(got(high).includes('high'));
    assert.ok(!got(high).some((id) => id === 'low' || id === 'standard'));
    assert.ok(got(standard).includes('low') && got(standard).includes('standard'));
    assert.ok(!got(standard).includes('high'));
  });
});
