/**
 * The etcds protocol with only `kvmq serve` and a plain etcd client: the
 * server's own dispatcher moves producer puts to a registered consumer's
 * prefix, and the consumer's delete is the ack. No kvmq process runs. With
 * auth on, a consumer's role limits it to deleting under its own path.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { Etcd3, EtcdPermissionDeniedError } from 'etcd3';
import { b64, RawClient, startServe, type ServeProcess } from './fixtures/serve-support.js';
import { waitFor } from './support/wait.js';

describe('queues dispatched inside kvmq serve', () => {
  let server: ServeProcess;

  before(async () => {
    server = await startServe();
  });

  after(async () => {
    await server.stop();
  });

  async function consume(
    client: Etcd3,
    queue: string,
    count: number,
    handled: Map<string, string>,
    consumer: string = randomUUID(),
  ): Promise<void> {
    const lease = client.lease(10);
    await lease.put(`/queue/${queue}/consumer/${consumer}`).value('plain-client');
    const prefix = `/queue/${queue}/consumer/${consumer}/`;
    const watcher = await client.watch().prefix(prefix).create();
    watcher.on('put', (kv) => {
      const key = kv.key.toString();
      handled.set(key.slice(key.lastIndexOf('/') + 1), kv.value.toString());
      void client.delete().key(key).exec();
    });
    // Deliveries made before the watch started.
    for (const [key, value] of Object.entries(await client.getAll().prefix(prefix).strings())) {
      handled.set(key.slice(key.lastIndexOf('/') + 1), value);
      await client.delete().key(key);
    }
    await waitFor(() => handled.size >= count, {
      timeoutMs: 20_000,
      what: () => `${count} deliveries (${handled.size})`,
    });
    await watcher.cancel();
    await lease.revoke();
  }

  test('a plain producer put reaches a plain consumer, and its delete acks it', { timeout: 60_000 }, async () => {
    const client = new Etcd3({ hosts: `http://${server.endpoint}` });
    try {
      const handled = new Map<string, string>();
      const consuming = consume(client, 'jobs', 20, handled);
      for (let i = 0; i < 20; i++) await client.put(`/queue/jobs/producer/m${i}`).value(`payload ${i}`);
      await consuming;
      assert.equal(handled.size, 20);
      for (let i = 0; i < 20; i++) assert.equal(handled.get(`m${i}`), `payload ${i}`);
      // Acked messages leave the ordered queue.
      await waitFor(
        async () => {
          const ordered = await client.getAll().prefix('/queue/jobs/').keys();
          return ordered.filter((k) => /^\/queue\/jobs\/\d+\//.test(k)).length === 0;
        },
        { timeoutMs: 10_000, what: 'the ordered queue to empty' },
      );
      const election = await client.get('/queue/jobs').string();
      assert.match(election ?? '', /^kvmq-serve@/);
    } finally {
      client.close();
    }
  });

  test('after a restart the server dispatches again', { timeout: 60_000 }, async () => {
    await server.restart();
    const client = new Etcd3({ hosts: `http://${server.endpoint}` });
    try {
      const handled = new Map<string, string>();
      for (let i = 0; i < 5; i++) await client.put(`/q/short/p/s${i}`).value(`short ${i}`);
      await consume(client, 'short', 5, handled);
      assert.equal(handled.size, 5);
    } finally {
      client.close();
    }
  });

  test('with auth on, a consumer may delete only under its own path', { timeout: 60_000 }, async () => {
    // Last in this file: auth stays on.
    const admin = new RawClient(server.endpoint);
    const ok = async (method: string, request: Record<string, unknown>): Promise<void> => {
      const outcome = await admin.call('Auth', method, request);
      assert.ok('ok' in outcome, `${method}: ${JSON.stringify(outcome)}`);
    };
    const prefix = (key: string): Record<string, string> => {
      const end = Buffer.from(key);
      end[end.length - 1] = (end[end.length - 1] ?? 0) + 1;
      return { key: b64(key), range_end: end.toString('base64') };
    };
    const READ = 0;
    const WRITE = 1;
    const READWRITE = 2;
    const users = [
      { name: 'root', role: 'root', perms: [] },
      { name: 'producer', role: 'produce', perms: [[WRITE, '/queue/guarded/producer/']] },
      {
        name: 'alice',
        role: 'consume-alice',
        perms: [
          [READ, '/queue/guarded/'],
          [READWRITE, '/queue/guarded/consumer/alice'],
        ],
      },
    ] as const;
    try {
      for (const user of users) {
        await ok('UserAdd', { name: user.name, password: `${user.name}-pw` });
        if (user.role !== 'root') await ok('RoleAdd', { name: user.role });
        for (const [permType, key] of user.perms) {
          await ok('RoleGrantPermission', { name: user.role, perm: { permType, ...prefix(key) } });
        }
        await ok('UserGrantRole', { user: user.name, role: user.role });
      }
      await ok('AuthEnable', {});
    } finally {
      admin.close();
    }
    const as = (name: string): Etcd3 =>
      new Etcd3({ hosts: `http://${server.endpoint}`, auth: { username: name, password: `${name}-pw` } });
    const producer = as('producer');
    const alice = as('alice');
    try {
      for (let i = 0; i < 3; i++) await producer.put(`/queue/guarded/producer/g${i}`).value(`guarded ${i}`);
      await assert.rejects(producer.get('/queue/guarded/producer/g0').string(), EtcdPermissionDeniedError);
      const handled = new Map<string, string>();
      await consume(alice, 'guarded', 3, handled, 'alice');
      assert.deepEqual([...handled.keys()].sort(), ['g0', 'g1', 'g2']);
      // Outside her path: another consumer's deliveries, the ordered queue, the producers' keys.
      for (const key of ['/queue/guarded/consumer/bob/0000000000000000001/g9', '/queue/guarded/1/g0']) {
        await assert.rejects(alice.delete().key(key).exec(), EtcdPermissionDeniedError, key);
      }
      await assert.rejects(alice.put('/queue/guarded/producer/x').value('y').exec(), EtcdPermissionDeniedError);
    } finally {
      producer.close();
      alice.close();
    }
  });
});
