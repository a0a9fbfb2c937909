/**
 * `kvmq serve` keeps what it acknowledged: a `kill -9` in the middle of
 * concurrent writes loses no acknowledged put, and a restart keeps the
 * revision, the compaction, the leases (with the time they had left and
 * their keys), auth, the history's hash, and queue state (messages waiting,
 * delivered and acked); and no client hears of a write before it is on disk.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { Etcd3 } from 'etcd3';
import { startServer } from '../src/serve/index.js';
import { b64, RawClient, startServe, waitResponses, type ServeProcess } from './fixtures/serve-support.js';
import { quietPeriod, waitFor } from './support/wait.js';

const WRITERS = 16;

describe('kvmq serve is durable', () => {
  const servers: ServeProcess[] = [];

  after(async () => {
    await Promise.allSettled(servers.map((s) => s.stop()));
  });

  test('kill -9 during concurrent writes loses no acknowledged put', { timeout: 60_000 }, async () => {
    const server = await startServe();
    servers.push(server);
    const client = new RawClient(server.endpoint);
    const acked = new Map<string, { value: string; revision: number }>();
    let stop = false;
    const writer = async (w: number): Promise<void> => {
      for (let i = 0; !stop; i++) {
        const key = `d/${w}/${i}`;
        const value = `${w}-${i}-${'x'.repeat(i % 50)}`;
        const outcome = await client.call('KV', 'Put', { key: b64(key), value: b64(value) });
        if (!('ok' in outcome)) return;
        acked.set(key, { value, revision: Number((outcome.ok.header as { revision: string }).revision) });
      }
    };
    const writing = Promise.all(Array.from({ length: WRITERS }, (_, w) => writer(w)));
    await waitFor(() => acked.size >= 1500, {
      timeoutMs: 30_000,
      what: () => `1500 acknowledged puts (${acked.size})`,
    });
    await server.kill('SIGKILL');
    stop = true;
    await writing;
    client.close();

    await server.restart();
    const reader = new RawClient(server.endpoint);
    try {
      const all = await reader.call('KV', 'Range', { key: b64('d/'), range_end: b64('d0') });
      assert.ok('ok' in all, JSON.stringify(all));
      const stored = new Map(
        (all.ok.kvs as { key: string; value: string; mod_revision: string }[]).map((kv) => [
          Buffer.from(kv.key, 'base64').toString(),
          { value: Buffer.from(kv.value, 'base64').toString(), revision: Number(kv.mod_revision) },
        ]),
      );
      const lost = [...acked].filter(([key, want]) => stored.get(key)?.value !== want.value);
      assert.deepEqual(lost, [], `${lost.length} acknowledged puts missing after kill -9`);
      for (const [key, want] of acked) assert.equal(stored.get(key)?.revision, want.revision, key);
      const maxAcked = Math.max(...[...acked.values()].map((v) => v.revision));
      assert.ok(Number((all.ok.header as { revision: string }).revision) >= maxAcked);
    } finally {
      reader.close();
    }
  });

  test(
    'a restart keeps revisions, compaction, leases with their time left, auth and the hash',
    { timeout: 60_000 },
    async () => {
      const server = await startServe();
      servers.push(server);
      let client = new RawClient(server.endpoint);
      for (let i = 0; i < 10; i++) await client.call('KV', 'Put', { key: b64(`r/${i % 3}`), value: b64(`v${i}`) });
      await client.call('KV', 'Compact', { revision: '5', physical: true });
      const grant = await client.call('Lease', 'LeaseGrant', { ID: '5150', TTL: '60' });
      assert.ok('ok' in grant);
      await client.call('KV', 'Put', { key: b64('r/leased'), value: b64('x'), lease: '5150' });
      await client.call('Auth', 'UserAdd', { name: 'root', password: 'pw' });
      await client.call('Auth', 'UserGrantRole', { user: 'root', role: 'root' });
      const hashBefore = await client.call('Maintenance', 'HashKV', { revision: '0' });
      const rangeBefore = await client.call('KV', 'Range', { key: b64('r/'), range_end: b64('r0') });
      assert.ok('ok' in hashBefore && 'ok' in rangeBefore);
      client.close();

      for (const how of ['SIGTERM', 'SIGKILL'] as const) {
        await server.kill(how);
        await server.restart();
        client = new RawClient(server.endpoint);
        const range = await client.call('KV', 'Range', { key: b64('r/'), range_end: b64('r0') });
        assert.ok('ok' in range);
        assert.deepEqual(range.ok.kvs, rangeBefore.ok.kvs, `${how}: the keys`);
        assert.equal(
          (range.ok.header as { revision: string }).revision,
          (rangeBefore.ok.header as { revision: string }).revision,
        );
        const compacted = await client.call('KV', 'Range', { key: b64('r/0'), revision: '3' });
        assert.deepEqual(compacted, {
          error: { code: 11, details: 'etcdserver: mvcc: required revision has been compacted' },
        });
        const hash = await client.call('Maintenance', 'HashKV', { revision: '0' });
        assert.ok('ok' in hash);
        assert.equal(hash.ok.hash, hashBefore.ok.hash, `${how}: the hash`);
        const ttl = await client.call('Lease', 'LeaseTimeToLive', { ID: '5150', keys: true });
        assert.ok('ok' in ttl);
        assert.equal(ttl.ok.grantedTTL, '60');
        assert.ok(Number(ttl.ok.TTL) > 40 && Number(ttl.ok.TTL) <= 60, `${how}: TTL left ${String(ttl.ok.TTL)}`);
        assert.deepEqual(ttl.ok.keys, [b64('r/leased')]);
        const users = await client.call('Auth', 'UserGet', { name: 'root' });
        assert.ok('ok' in users);
        assert.deepEqual(users.ok.roles, ['root']);
        client.close();
      }
    },
  );

  test('a lease not kept alive across a crash still expires and deletes its keys', { timeout: 60_000 }, async () => {
    const server = await startServe();
    servers.push(server);
    let client = new RawClient(server.endpoint);
    const grant = await client.call('Lease', 'LeaseGrant', { ID: '7', TTL: '3' });
    assert.ok('ok' in grant);
    await client.call('KV', 'Put', { key: b64('gone'), value: b64('soon'), lease: '7' });
    client.close();
    await server.kill('SIGKILL');
    await server.restart();
    client = new RawClient(server.endpoint);
    try {
      await waitFor(
        async () => {
          const got = await client.call('KV', 'Range', { key: b64('gone') });
          return 'ok' in got && (got.ok.kvs as unknown[]).length === 0;
        },
        { timeoutMs: 15_000, what: 'the leased key to go' },
      );
      const ttl = await client.call('Lease', 'LeaseTimeToLive', { ID: '7' });
      assert.ok('ok' in ttl);
      assert.equal(ttl.ok.TTL, '-1');
    } finally {
      client.close();
    }
  });

  test('kill -9 keeps queue state: waiting, delivered and acked messages', { timeout: 90_000 }, async () => {
    const server = await startServe();
    servers.push(server);
    const queue = 'kept';
    const ids = Array.from({ length: 10 }, (_, i) => `m${i}`);
    const ordered = (keys: string[]): string[] => keys.filter((k) => /^\/queue\/kept\/\d+\//.test(k));
    let client = new Etcd3({ hosts: `http://${server.endpoint}` });
    // Consumer A takes four deliveries, acks two, and dies with the server (its lease not renewed after).
    const ackedByA: string[] = [];
    try {
      for (const id of ids) await client.put(`/queue/${queue}/producer/${id}`).value(`payload ${id}`);
      await waitFor(async () => ordered(await client.getAll().prefix(`/queue/${queue}/`).keys()).length === 10, {
        timeoutMs: 20_000,
        what: 'the ten messages in the ordered queue',
      });
      const lease = client.lease(3);
      const a = `/queue/${queue}/consumer/a`;
      await lease.put(a).value(JSON.stringify({ host: 'a', capacity: 4 }));
      const deliveries = await waitFor(
        async () => {
          const keys = await client.getAll().prefix(`${a}/`).keys();
          return keys.length === 4 ? keys : null;
        },
        { timeoutMs: 20_000, what: 'four deliveries to consumer A' },
      );
      for (const key of deliveries.slice(0, 2)) {
        await client.delete().key(key);
        ackedByA.push(key.slice(key.lastIndexOf('/') + 1));
      }
      lease.release();
      await server.kill('SIGKILL');
    } finally {
      client.close();
    }

    await server.restart();
    client = new Etcd3({ hosts: `http://${server.endpoint}` });
    try {
      // Consumer B gets the waiting messages at once, and A's two unacked ones once A's lease has run out.
      const handled = new Map<string, string>();
      const lease = client.lease(10);
      const b = `/queue/${queue}/consumer/b`;
      await lease.put(b).value(JSON.stringify({ host: 'b', capacity: 16 }));
      const watcher = await client.watch().prefix(`${b}/`).create();
      const take = (key: string, value: string): void => {
        handled.set(key.slice(key.lastIndexOf('/') + 1), value);
        void client.delete().key(key).exec();
      };
      watcher.on('put', (kv) => take(kv.key.toString(), kv.value.toString()));
      for (const [key, value] of Object.entries(await client.getAll().prefix(`${b}/`).strings())) take(key, value);
      const expected = ids.filter((id) => !ackedByA.includes(id));
      await waitFor(() => handled.size >= expected.length, {
        timeoutMs: 30_000,
        what: () => `${expected.length} deliveries to consumer B (${[...handled.keys()].join(', ')})`,
      });
      assert.deepEqual([...handled.keys()].sort(), expected.sort(), 'B gets every message A did not ack, once');
      for (const id of expected) assert.equal(handled.get(id), `payload ${id}`);
      await waitFor(async () => ordered(await client.getAll().prefix(`/queue/${queue}/`).keys()).length === 0, {
        timeoutMs: 20_000,
        what: 'the ordered queue to empty',
      });
      await watcher.cancel();
      await lease.revoke();
    } finally {
      client.close();
    }
  });

  test('a write is answered, read and watched only once its sync has returned', { timeout: 30_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvmq-serve-sync-'));
    const server = await startServer({ dataDir: dir, listen: '127.0.0.1:0', dispatch: false });
    // Hold every sync of the WAL until the test lets it go.
    const backend = server.engine.backend;
    const realSync = backend.syncWal.bind(backend);
    const held: (() => void)[] = [];
    let holding = true;
    backend.syncWal = (done) => {
      if (holding) held.push(() => realSync(done));
      else realSync(done);
    };
    const client = new RawClient(`127.0.0.1:${server.port}`);
    const watch = client.stream('Watch', 'Watch');
    try {
      watch.send({ create_request: { key: b64('held') } });
      await waitResponses(watch, 1);
      const before = server.engine.currentRev;
      let putAnswered = false;
      const put = client.call('KV', 'Put', { key: b64('held'), value: b64('v') }).then((outcome) => {
        putAnswered = true;
        return outcome;
      });
      await waitFor(() => server.engine.currentRev === before + 1 && held.length > 0, {
        what: 'the put committed, its sync held',
      });
      let readAnswered = false;
      const read = client.call('KV', 'Range', { key: b64('held') }).then((outcome) => {
        readAnswered = true;
        return outcome;
      });
      await quietPeriod(300);
      assert.equal(putAnswered, false, 'the put is answered before its sync');
      assert.equal(readAnswered, false, 'a read shows the put before its sync');
      assert.equal(watch.responses.length, 1, 'a watcher hears of the put before its sync');
      holding = false;
      for (const release of held.splice(0)) release();
      const [written, got] = await Promise.all([put, read]);
      assert.ok('ok' in written && 'ok' in got);
      assert.equal((got.ok.kvs as { value: string }[])[0]?.value, b64('v'));
      await waitResponses(watch, 2);
    } finally {
      watch.close();
      client.close();
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
