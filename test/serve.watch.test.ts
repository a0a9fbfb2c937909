/**
 * Watch details, compared with a real etcd 3.4 scenario by scenario: client
 * watch IDs (and duplicates), cancel, progress requests, empty ranges,
 * filters, fragments of large responses, periodic progress notifications,
 * and lease expiry seen as delete events.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  b64,
  RawClient,
  startEtcd,
  startServe,
  waitResponses,
  type ServeProcess,
  type ServerHandle,
  type WatchHandle,
} from './fixtures/serve-support.js';
import { waitFor } from './support/wait.js';

const PROGRESS_MS = 400;

/** A response as compared: IDs that name the server removed. */
function clean(resp: Record<string, unknown>): Record<string, unknown> {
  const header = resp.header as Record<string, unknown> | null;
  if (header === null) return resp;
  const rest = { ...header };
  delete rest.cluster_id;
  delete rest.member_id;
  return { ...resp, header: rest };
}

describe('watch details match etcd', () => {
  let etcd: ServerHandle;
  let kvmq: ServeProcess;
  let clients: RawClient[];

  before(async () => {
    [etcd, kvmq] = await Promise.all([
      startEtcd([`--experimental-watch-progress-notify-interval=${PROGRESS_MS}ms`]),
      startServe({ progressMs: PROGRESS_MS }),
    ]);
    clients = [new RawClient(etcd.endpoint), new RawClient(kvmq.endpoint)];
  });

  after(async () => {
    for (const c of clients) c.close();
    await Promise.allSettled([etcd.stop(), kvmq.stop()]);
  });

  /** Runs a scenario on both servers (etcd first) and returns each one's watch responses. */
  async function both(
    scenario: (client: RawClient, watch: WatchHandle) => Promise<void>,
  ): Promise<[Record<string, unknown>[], Record<string, unknown>[]]> {
    const results: Record<string, unknown>[][] = [];
    for (const client of clients) {
      const watch = client.stream('Watch', 'Watch');
      try {
        await scenario(client, watch);
      } finally {
        watch.close();
      }
      results.push(watch.responses.map(clean));
    }
    return [results[0] ?? [], results[1] ?? []];
  }

  async function revision(client: RawClient): Promise<number> {
    const outcome = await client.call('KV', 'Range', { key: b64('x') });
    assert.ok('ok' in outcome);
    return Number((outcome.ok.header as { revision: string }).revision);
  }

  test('client-chosen IDs, duplicates, auto IDs, cancel and progress requests', async () => {
    const [fromEtcd, fromKvmq] = await both(async (client, watch) => {
      const prefix = 'ids/';
      watch.send({ create_request: { key: b64(`${prefix}a`), watch_id: '7' } });
      watch.send({ create_request: { key: b64(`${prefix}b`), watch_id: '7' } });
      watch.send({ create_request: { key: b64(`${prefix}c`) } });
      watch.send({ create_request: { key: b64(`${prefix}d`), range_end: b64(`${prefix}a`) } });
      await waitResponses(watch, 4);
      watch.send({ cancel_request: { watch_id: '7' } });
      watch.send({ cancel_request: { watch_id: '99' } });
      watch.send({ progress_request: {} });
      await waitResponses(watch, 6);
      await client.call('KV', 'Put', { key: b64(`${prefix}c`), value: b64('v') });
      await waitResponses(watch, 7);
    });
    const shape = (list: Record<string, unknown>[]): unknown[] =>
      list.map((r) => ({ ...r, events: (r.events as { kv: { key: string } }[]).length }));
    assert.deepEqual(shape(fromKvmq), shape(fromEtcd));
  });

  test('filters drop puts or deletes; prev_kv on every event but creations', async () => {
    const [fromEtcd, fromKvmq] = await both(async (client, watch) => {
      watch.send({ create_request: { key: b64('f/'), range_end: b64('f0'), filters: [0], prev_kv: true } });
      watch.send({ create_request: { key: b64('f/'), range_end: b64('f0'), filters: [1], prev_kv: true } });
      await waitResponses(watch, 2);
      await client.call('KV', 'Put', { key: b64('f/1'), value: b64('a') });
      await client.call('KV', 'Put', { key: b64('f/1'), value: b64('b') });
      await client.call('KV', 'DeleteRange', { key: b64('f/1') });
      await waitResponses(watch, 5);
    });
    const events = (list: Record<string, unknown>[]): unknown =>
      list
        .filter((r) => (r.events as unknown[]).length > 0)
        .map((r) => ({ id: r.watch_id, events: (r.events as Record<string, unknown>[]).map(clean) }))
        .sort((x, y) => String(x.id).localeCompare(String(y.id)));
    assert.deepEqual(events(fromKvmq), events(fromEtcd));
  });

  test('a large response comes in fragments when asked', { timeout: 60_000 }, async () => {
    const big = Buffer.alloc(900 * 1024, 'x').toString('base64');
    const [fromEtcd, fromKvmq] = await both(async (client, watch) => {
      const start = (await revision(client)) + 1;
      for (let i = 0; i < 4; i++) await client.call('KV', 'Put', { key: b64(`frag/${i}`), value: big });
      watch.send({
        create_request: { key: b64('frag/'), range_end: b64('frag0'), start_revision: String(start), fragment: true },
      });
      await waitFor(() => watch.responses.some((r) => (r.events as unknown[]).length > 0 && r.fragment === false), {
        what: 'the last fragment',
        timeoutMs: 20_000,
      });
    });
    const shape = (list: Record<string, unknown>[]): unknown[] =>
      list.map((r) => ({ fragment: r.fragment, created: r.created, events: (r.events as unknown[]).length }));
    assert.deepEqual(shape(fromKvmq), shape(fromEtcd));
    assert.ok(fromEtcd.filter((r) => r.fragment === true).length > 0, 'the response was split');
  });

  test('progress_notify: a quiet watcher hears the revision periodically', { timeout: 30_000 }, async () => {
    const [fromEtcd, fromKvmq] = await both(async (_client, watch) => {
      watch.send({ create_request: { key: b64('quiet'), progress_notify: true } });
      await waitResponses(watch, 3, 15_000);
    });
    assert.deepEqual(fromKvmq.slice(0, 3), fromEtcd.slice(0, 3));
    assert.equal(fromEtcd[0]?.created, true, "etcd's first response creates the watch");
    assert.equal(fromKvmq[1]?.watch_id, fromKvmq[0]?.watch_id);
  });

  test(
    'a watcher whose client stops reading pauses, then catches up with nothing lost',
    { timeout: 60_000 },
    async () => {
      // kvmq only: a slow client must cost bounded memory (etcd keeps such "victim" watchers aside too).
      const client = clients[1] as RawClient;
      const watch = client.stream('Watch', 'Watch');
      try {
        watch.send({ create_request: { key: b64('slow/'), range_end: b64('slow0') } });
        await waitResponses(watch, 1);
        watch.pause();
        // About 40 MiB of events, well past the point where the server stops sending.
        const value = Buffer.alloc(400 * 1024, 7).toString('base64');
        for (let i = 0; i < 100; i++) await client.call('KV', 'Put', { key: b64(`slow/${i % 10}`), value });
        watch.resume();
        const events = (): { kv: { key: string; mod_revision: string } }[] =>
          watch.responses.flatMap((r) => r.events as { kv: { key: string; mod_revision: string } }[]);
        await waitFor(() => events().length >= 100, {
          timeoutMs: 30_000,
          what: () => `100 events (${events().length})`,
        });
        const revisions = events().map((e) => Number(e.kv.mod_revision));
        assert.equal(revisions.length, 100);
        for (let i = 1; i < revisions.length; i++)
          assert.equal(revisions[i], (revisions[i - 1] ?? 0) + 1, `event ${i}`);
      } finally {
        watch.close();
      }
    },
  );

  test('an expired lease deletes its keys in key order, in one revision', { timeout: 30_000 }, async () => {
    const [fromEtcd, fromKvmq] = await both(async (client, watch) => {
      const id = '424242';
      const grant = await client.call('Lease', 'LeaseGrant', { ID: id, TTL: '2' });
      assert.ok('ok' in grant, JSON.stringify(grant));
      watch.send({ create_request: { key: b64('exp/'), range_end: b64('exp0') } });
      await waitResponses(watch, 1);
      for (const k of ['exp/c', 'exp/a', 'exp/b']) {
        await client.call('KV', 'Put', { key: b64(k), value: b64('v'), lease: id });
      }
      await waitFor(() => watch.responses.some((r) => (r.events as { type: number }[]).some((e) => e.type === 1)), {
        what: 'the expiry',
        timeoutMs: 15_000,
      });
    });
    const deletes = (list: Record<string, unknown>[]): unknown[] =>
      list
        .flatMap((r) => r.events as { type: number; kv: { key: string; mod_revision: string } }[])
        .filter((e) => e.type === 1)
        .map((e) => Buffer.from(e.kv.key, 'base64').toString());
    assert.deepEqual(deletes(fromKvmq), deletes(fromEtcd));
    assert.deepEqual(deletes(fromKvmq), ['exp/a', 'exp/b', 'exp/c']);
    const revisions = new Set(
      fromKvmq
        .flatMap((r) => r.events as { type: number; kv: { mod_revision: string } }[])
        .filter((e) => e.type === 1)
        .map((e) => e.kv.mod_revision),
    );
    assert.equal(revisions.size, 1);
  });
});
