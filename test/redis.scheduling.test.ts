/**
 * Scheduling on the Redis store (issue 13), on a single server and on a three-master cluster: priorities
 * in lanes, debounce, group concurrency, the rate limits (queue-wide and per group) and schedules, through the
 * store contract.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { connect, type Client } from '../src/index.js';
import { startCluster, type RedisCluster } from '../scripts/servers/redis.mjs';
import { deletePrefixes, redisTestUrl } from './fixtures/redis-server.js';
import type { ClaimRequest, ClaimResult, NewMessage } from '../src/stores/contract/contract.js';
import { plainMessage } from '../src/stores/contract/new-message.js';
import { storeOf } from '../src/client/client-store.js';

const base = redisTestUrl();
const dir = mkdtempSync(join(tmpdir(), 'kvmq-redis-scheduling-'));
const prefixes: string[] = [];
// The prefix of the client `open` made last (its keys are `<prefix>:{<queue>}:<name>`).
let lastPrefix = '';
const clients: Client[] = [];
let cluster: RedisCluster | null = null;

before(async () => {
  cluster = await startCluster(dir);
});

after(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
  await cluster?.stop();
  await deletePrefixes(base, prefixes);
  rmSync(dir, { recursive: true, force: true });
});

const SERVERS = {
  single: (prefix: string) => `${base}?prefix=${prefix}`,
  cluster: (prefix: string) => {
    if (cluster === null) throw new Error('the Redis Cluster did not start');
    return `${cluster.url}&prefix=${prefix}`;
  },
};

async function open(server: keyof typeof SERVERS): Promise<Client> {
  const prefix = `kvmq-test-sched-${process.pid}-${randomBytes(3).toString('hex')}`;
  prefixes.push(prefix);
  lastPrefix = prefix;
  const client = await connect(SERVERS[server](prefix), { maintenance: false });
  clients.push(client);
  return client;
}

function claim(client: Client, queue: string, max: number, more: Partial<ClaimRequest> = {}): Promise<ClaimResult> {
  return storeOf(client).claim(queue, {
    consumerId: 'c1',
    max,
    lockMs: 30_000,
    accepts: null,
    eoqBackoffMs: () => 50,
    ...more,
  });
}

async function claimIds(
  client: Client,
  queue: string,
  max: number,
  more: Partial<ClaimRequest> = {},
): Promise<string[]> {
  return (await claim(client, queue, max, more)).messages.map((m) => m.id);
}

for (const server of Object.keys(SERVERS) as (keyof typeof SERVERS)[]) {
  void describe(`redis ${server}: priorities`, () => {
    void test('claims take the lowest priority number first, oldest first within one', async () => {
      const c = await open(server);
      const order: [string, number | undefined][] = [
        ['p5', 5],
        ['a0', undefined],
        ['p3a', 3],
        ['b0', 0],
        ['p1000', 1000],
        ['p3b', 3],
        ['c0', undefined],
      ];
      for (const [id, priority] of order)
        await c.enqueue('q', id, { id, ...(priority === undefined ? {} : { priority }) });
      assert.deepEqual(await claimIds(c, 'q', 2), ['a0', 'b0']);
      assert.deepEqual(await claimIds(c, 'q', 3), ['c0', 'p3a', 'p3b']);
      await c.enqueue('q', 'd0', { id: 'd0' });
      await c.enqueue('q', 'p4', { id: 'p4', priority: 4 });
      assert.deepEqual(await claimIds(c, 'q', 10), ['d0', 'p4', 'p5', 'p1000']);
      const empty = await claim(c, 'q', 1);
      assert.deepEqual(empty.messages, []);
      assert.equal(empty.queueSize, 9);
    });

    void test('a filtering consumer gets its classes by priority and never another class', async () => {
      const c = await open(server);
      await c.configure('q', { filterEnums: { kind: ['a', 'b'] } });
      await c.enqueue('q', 'b-hi', { id: 'b-hi', priority: 0, filters: { kind: 'b' } });
      await c.enqueue('q', 'a-lo', { id: 'a-lo', priority: 9, filters: { kind: 'a' } });
      await c.enqueue('q', 'a-mid', { id: 'a-mid', priority: 2, filters: { kind: 'a' } });
      await c.enqueue('q', 'none-lo', { id: 'none-lo', priority: 5 });
      const accepts = (cls: string): boolean => cls === '' || cls === 'kind=a';
      assert.deepEqual(await claimIds(c, 'q', 10, { accepts }), ['a-mid', 'none-lo', 'a-lo']);
      assert.deepEqual(await claimIds(c, 'q', 10), ['b-hi']);
    });

    void test('a retried or backed-off message keeps its priority; inspect shows priority and group', async () => {
      const c = await open(server);
      await c.enqueue('q', 'lo', { id: 'lo', priority: 7, group: 'tenant-1' });
      await c.enqueue('q', 'later', { id: 'later', priority: 3, initialBackoffMs: 50 });
      const [lo] = (await claim(c, 'q', 1)).messages;
      assert.equal(lo?.id, 'lo');
      await storeOf(c).finish('q', 'c1', [
        { id: 'lo', attempt: 1, outcome: 'retry', backoffMs: 0, error: null, startedAt: Date.now() },
      ]);
      await c.enqueue('q', 'plain', { id: 'plain' });
      await new Promise((r) => setTimeout(r, 80));
      assert.deepEqual(await claimIds(c, 'q', 5), ['plain', 'later', 'lo']);
      const details = await c.show('q', 'lo');
      assert.equal(details?.priority, 7);
      assert.equal(details.group, 'tenant-1');
      const plain = await c.show('q', 'plain');
      assert.equal(plain?.priority, 0);
      assert.equal(plain.group, null);
    });

    void test('list shows queued messages in claim order; remove and clear empty the lanes', async () => {
      const c = await open(server);
      for (const [id, priority] of [
        ['x9', 9],
        ['x0', 0],
        ['x2', 2],
        ['y2', 2],
      ] as const) {
        await c.enqueue('q', id, { id, priority });
      }
      const page = await c.list('q', { state: 'queued' });
      assert.deepEqual(
        page.messages.map((m) => m.id),
        ['x0', 'x2', 'y2', 'x9'],
      );
      const paged: string[] = [];
      let cursor: string | undefined;
      do {
        const p = await c.list('q', { state: 'queued', limit: 1, ...(cursor === undefined ? {} : { cursor }) });
        paged.push(...p.messages.map((m) => m.id));
        cursor = p.cursor ?? undefined;
      } while (cursor !== undefined);
      assert.deepEqual(paged, ['x0', 'x2', 'y2', 'x9']);
      assert.deepEqual(await c.remove('q', 'x2'), { ok: true, id: 'x2', state: null });
      assert.deepEqual(await claimIds(c, 'q', 10), ['x0', 'y2', 'x9']);
      await c.enqueue('q', 'z4', { id: 'z4', priority: 4 });
      await c.clear('q');
      await c.enqueue('q', 'z5', { id: 'z5', priority: 5 });
      assert.deepEqual(await claimIds(c, 'q', 10), ['z5']);
    });
  });
}

for (const server of Object.keys(SERVERS) as (keyof typeof SERVERS)[]) {
  void describe(`redis ${server}: debounce`, () => {
    void test('a burst becomes one message: the waiting one takes the last payload and ready time', async () => {
      const c = await open(server);
      await c.configure('q', { events: true });
      const first = await c.enqueue('q', { n: 1 }, { id: 'a', debounce: { id: 'user-7', ms: 200 }, priority: 3 });
      assert.deepEqual(first, { ok: true, id: 'a', action: 'added' });
      const second = await c.enqueue(
        'q',
        { n: 2 },
        { id: 'b', debounce: { id: 'user-7', ms: 300 }, metadata: { k: 1 } },
      );
      assert.deepEqual(second, { ok: true, id: 'a', action: 'debounced' });
      assert.equal(await c.status('q', 'b'), null);
      const status = await c.status('q', 'a');
      assert.equal(status?.state, 'queued-with-backoff');
      assert.ok((status.until ?? 0) - Date.now() > 200, 'the ready time moved to now + 300 ms');
      const details = await c.show('q', 'a');
      assert.deepEqual(details?.payload, { n: 2 });
      assert.deepEqual(details.metadata, { k: 1 });
      assert.equal(details.priority, 3);
      assert.deepEqual(await claimIds(c, 'q', 5), []);
      await new Promise((r) => setTimeout(r, 350));
      assert.deepEqual(await claimIds(c, 'q', 5), ['a']);
      // Held now: the next one with that debounce id is a new message.
      assert.deepEqual(await c.enqueue('q', 3, { id: 'c', debounce: { id: 'user-7', ms: 0 } }), {
        ok: true,
        id: 'c',
        action: 'added',
      });
      assert.deepEqual(await c.enqueue('q', 4, { id: 'd', debounce: { id: 'user-7', ms: 0 } }), {
        ok: true,
        id: 'c',
        action: 'debounced',
      });
      assert.deepEqual(await claimIds(c, 'q', 5), ['c']);
      assert.deepEqual((await c.show('q', 'c'))?.payload, 4);
      const events = (await c.readEvents('q')).events.map((e) => `${e.type} ${e.id}`);
      assert.deepEqual(events, ['enqueued a', 'enqueued a', 'started a', 'enqueued c', 'enqueued c', 'started c']);
    });

    void test('one batch: same-tick enqueues with one debounce id give one message', async () => {
      const c = await open(server);
      const results = await c.enqueueBatch('q', [
        { payload: 1, id: 'x1', debounce: { id: 'k', ms: 0 } },
        { payload: 2, id: 'x2', debounce: { id: 'k', ms: 0 } },
        { payload: 3, id: 'x3', debounce: { id: 'k', ms: 0 } },
      ]);
      assert.deepEqual(
        results.map((r) => r.id),
        ['x1', 'x1', 'x1'],
      );
      assert.deepEqual(await claimIds(c, 'q', 5), ['x1']);
      assert.deepEqual((await c.show('q', 'x1'))?.payload, 3);
    });

    void test('remove, GC and clear take the debounce index entry with the message', async () => {
      const c = await open(server);
      await c.enqueue('q', 1, { id: 'r1', debounce: { id: 'k', ms: 10_000 } });
      await c.remove('q', 'r1');
      assert.deepEqual(await c.enqueue('q', 2, { id: 'r2', debounce: { id: 'k', ms: 10_000 } }), {
        ok: true,
        id: 'r2',
        action: 'added',
      });
      await c.clear('q');
      assert.deepEqual(await c.enqueue('q', 3, { id: 'r3', debounce: { id: 'k', ms: 0 } }), {
        ok: true,
        id: 'r3',
        action: 'added',
      });
      const [m] = (await claim(c, 'q', 1)).messages;
      assert.equal(m?.id, 'r3');
      await storeOf(c).finish('q', 'c1', [
        { id: 'r3', attempt: 1, outcome: 'success', backoffMs: 0, error: null, startedAt: Date.now() },
      ]);
      await c.configure('q', { gcLifetimeMs: 0 });
      await storeOf(c).gc('q', true);
      assert.equal(await c.status('q', 'r3'), null);
      const raw = await storeOf(c).queueStatus('q');
      assert.equal(raw.total, 0);
      assert.deepEqual(await c.enqueue('q', 4, { id: 'r4', debounce: { id: 'k', ms: 0 } }), {
        ok: true,
        id: 'r4',
        action: 'added',
      });
    });
  });
}

/** Enqueues a1, a2, a3 (group a), b1 (group b) and p (no group) on queue q, in that order. */
async function enqueueGroups(c: Client): Promise<void> {
  for (const [id, group] of [
    ['a1', 'a'],
    ['a2', 'a'],
    ['a3', 'a'],
    ['b1', 'b'],
    ['p', undefined],
  ] as const) {
    await c.enqueue('q', id, { id, ...(group === undefined ? {} : { group }) });
  }
}

function finishOk(c: Client, queue: string, id: string, attempt = 1): Promise<unknown> {
  return storeOf(c).finish(queue, 'c1', [
    { id, attempt, outcome: 'success', backoffMs: 0, error: null, startedAt: Date.now() },
  ]);
}

for (const server of Object.keys(SERVERS) as (keyof typeof SERVERS)[]) {
  void describe(`redis ${server}: group concurrency`, () => {
    void test('a full group is skipped while other groups and ungrouped messages flow; a finish wakes', async () => {
      const c = await open(server);
      await c.configure('q', { groupConcurrency: 1 });
      await enqueueGroups(c);
      assert.deepEqual(await claimIds(c, 'q', 10), ['a1', 'b1', 'p']);
      assert.deepEqual(await claimIds(c, 'q', 10), []);
      assert.equal((await c.status('q', 'a2'))?.state, 'queued');
      assert.deepEqual(
        (await c.list('q', { state: 'queued' })).messages.map((m) => m.id),
        ['a2', 'a3'],
      );
      let woken = 0;
      const stop = storeOf(c).subscribe('q', () => (woken += 1));
      await new Promise((r) => setTimeout(r, 100));
      woken = 0;
      await finishOk(c, 'q', 'a1');
      const deadline = Date.now() + 2000;
      while (woken === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      stop();
      assert.ok(woken > 0, 'a finish that frees a full group wakes idle workers');
      assert.deepEqual(await claimIds(c, 'q', 10), ['a2']);
      assert.deepEqual((await c.remove('q', 'a3')).ok, true);
      await finishOk(c, 'q', 'a2');
      assert.deepEqual(await claimIds(c, 'q', 10), []);
    });

    void test('an expired lock frees its group; raising or lifting the limit takes effect at the next claim', async () => {
      const c = await open(server);
      await c.configure('q', { groupConcurrency: 1 });
      for (const id of ['g1', 'g2', 'g3', 'g4']) await c.enqueue('q', id, { id, group: 'g', priority: 2 });
      assert.deepEqual(await claimIds(c, 'q', 10, { lockMs: 100 }), ['g1']);
      assert.deepEqual(await claimIds(c, 'q', 10), []);
      await new Promise((r) => setTimeout(r, 150));
      // g1's lock expired: it goes back to the front, and the group holds one again.
      const again = await claim(c, 'q', 10);
      assert.deepEqual(
        again.messages.map((m) => [m.id, m.attempt]),
        [['g1', 2]],
      );
      await c.configure('q', { groupConcurrency: 3 });
      assert.deepEqual(await claimIds(c, 'q', 10), ['g2', 'g3']);
      await c.configure('q', { groupConcurrency: null });
      assert.deepEqual(await claimIds(c, 'q', 10), ['g4']);
      assert.equal((await c.config('q')).groupConcurrency, null);
    });
  });
}

for (const server of Object.keys(SERVERS) as (keyof typeof SERVERS)[]) {
  void describe(`redis ${server}: rate limit`, () => {
    void test('claims take at most what the limit grants, and say when the next slot is', async () => {
      const c = await open(server);
      await c.configure('q', { rateLimit: { max: 3, perMs: 600 } });
      assert.deepEqual((await c.config('q')).rateLimit, { max: 3, perMs: 600 });
      for (let i = 0; i < 10; i++) await c.enqueue('q', i, { id: `m${i}` });
      assert.deepEqual(await claimIds(c, 'q', 10), ['m0', 'm1', 'm2']);
      const limited = await claim(c, 'q', 10);
      assert.deepEqual(limited.messages, []);
      assert.equal(limited.dryRuns, 0, 'a rate-limited claim is no dry run');
      const wait = (limited.wakeAt ?? 0) - Date.now();
      assert.ok(wait > 50 && wait <= 250, `the next slot is one interval (200 ms) away, got ${wait} ms`);
      await new Promise((r) => setTimeout(r, Math.max(0, (limited.wakeAt ?? 0) - Date.now()) + 30));
      assert.deepEqual(await claimIds(c, 'q', 10), ['m3']);
      // A second consumer shares the limit.
      assert.deepEqual(await claimIds(c, 'q', 10, { consumerId: 'c2' }), []);
      await c.configure('q', { rateLimit: null });
      assert.equal((await claimIds(c, 'q', 10)).length, 6);
    });
  });
}

for (const server of Object.keys(SERVERS) as (keyof typeof SERVERS)[]) {
  void describe(`redis ${server}: group rate limit`, () => {
    void test('a group waits for its slot, first in line, while others flow; no dry run; lifting it frees all', async () => {
      const c = await open(server);
      await c.configure('q', { groupRateLimit: { max: 1, perMs: 400 } });
      await enqueueGroups(c);
      assert.deepEqual(await claimIds(c, 'q', 10), ['a1', 'b1', 'p']);
      const waiting = await claim(c, 'q', 10);
      assert.deepEqual(waiting.messages, []);
      assert.equal(waiting.dryRuns, 0, 'a claim that finds only groups waiting for their rate is no dry run');
      const wait = (waiting.wakeAt ?? 0) - Date.now();
      assert.ok(wait > 200 && wait <= 450, `group a's next slot is one interval (400 ms) away, got ${wait} ms`);
      assert.deepEqual(
        (await c.list('q', { state: 'queued' })).messages.map((m) => m.id),
        ['a2', 'a3'],
      );
      await c.enqueue('q', 'a4', { id: 'a4', group: 'a' });
      await c.enqueue('q', 'p2', { id: 'p2' });
      assert.deepEqual(await claimIds(c, 'q', 10), ['p2']);
      await new Promise((r) => setTimeout(r, Math.max(0, (waiting.wakeAt ?? 0) - Date.now()) + 20));
      // The parked one goes first, and only one per slot, across consumers.
      assert.deepEqual(await claimIds(c, 'q', 10, { consumerId: 'c2' }), ['a2']);
      assert.deepEqual(await claimIds(c, 'q', 10), []);
      await c.configure('q', { groupRateLimit: null });
      assert.deepEqual(await claimIds(c, 'q', 10), ['a3', 'a4']);
    });
  });
}

void test('redis single: the per-group rate state of groups that stopped sending goes away', async () => {
  const c = await open('single');
  const redis = new Redis(base);
  try {
    const key = (name: string): string => `${lastPrefix}:{q}:${name}`;
    await c.configure('q', { groupRateLimit: { max: 1, perMs: 200 } });
    for (let i = 0; i < 5; i++) await c.enqueue('q', i, { id: `g${i}`, group: `g${i}` });
    await c.enqueue('q', 'g0b', { id: 'g0b', group: 'g0' });
    assert.equal((await claimIds(c, 'q', 10)).length, 5);
    assert.equal(await redis.zcard(key('group-rates')), 5);
    assert.deepEqual(await redis.zrange(key('group-waits'), 0, -1), ['g0']);
    await new Promise((r) => setTimeout(r, 250));
    assert.deepEqual(await claimIds(c, 'q', 10), ['g0b']);
    assert.deepEqual(await redis.zrange(key('group-rates'), 0, -1), ['g0']);
    await new Promise((r) => setTimeout(r, 250));
    assert.deepEqual(await claimIds(c, 'q', 10), []);
    assert.equal(await redis.exists(key('group-rates'), key('group-waits'), key('parked')), 0);
  } finally {
    redis.disconnect();
  }
});

function newMessage(id: string, more: Partial<NewMessage> = {}): NewMessage {
  return plainMessage(id, Buffer.from(JSON.stringify(id)), more);
}

for (const server of Object.keys(SERVERS) as (keyof typeof SERVERS)[]) {
  void describe(`redis ${server}: schedules`, () => {
    void test('put, list sorted by name, replace, remove; clear keeps them', async () => {
      const c = await open(server);
      assert.equal(await storeOf(c).putSchedule('q', { name: 'nightly', body: '{"a":1}', nextAt: 2000 }), true);
      assert.equal(await storeOf(c).putSchedule('q', { name: 'every-5s', body: '{"b": "x y"}', nextAt: 1000 }), true);
      assert.equal(await storeOf(c).putSchedule('q', { name: 'nightly', body: '{"a":2}', nextAt: 3000 }), false);
      assert.deepEqual(await storeOf(c).schedules('q'), [
        { name: 'every-5s', body: '{"b": "x y"}', nextAt: 1000 },
        { name: 'nightly', body: '{"a":2}', nextAt: 3000 },
      ]);
      await c.clear('q');
      assert.equal((await storeOf(c).schedules('q')).length, 2);
      assert.equal(await storeOf(c).removeSchedule('q', 'nightly'), true);
      assert.equal(await storeOf(c).removeSchedule('q', 'nightly'), false);
      assert.deepEqual(
        (await storeOf(c).schedules('q')).map((s) => s.name),
        ['every-5s'],
      );
      assert.deepEqual(await storeOf(c).schedules('other'), []);
    });

    void test('fireSchedule: compare-and-set and enqueue in one step; one winner among concurrent firings', async () => {
      const c = await open(server);
      await c.configure('q', { events: true });
      const s = { name: 'tick', body: '{"every":1000}', nextAt: 1000 };
      await storeOf(c).putSchedule('q', s);
      const firings = await Promise.all(
        Array.from({ length: 5 }, () =>
          storeOf(c).fireSchedule('q', s, 2000, [newMessage('tick:1000', { priority: 2 })]),
        ),
      );
      const won = firings.filter((f) => f !== null);
      assert.equal(won.length, 1);
      assert.deepEqual(won[0], [{ ok: true, id: 'tick:1000', action: 'added' }]);
      assert.deepEqual(await storeOf(c).schedules('q'), [{ ...s, nextAt: 2000 }]);
      assert.equal((await c.show('q', 'tick:1000'))?.priority, 2);
      // Stale: nothing written.
      assert.equal(await storeOf(c).fireSchedule('q', s, 3000, [newMessage('tick:2000')]), null);
      assert.equal(await c.status('q', 'tick:2000'), null);
      // A changed body is a different schedule too.
      assert.equal(await storeOf(c).fireSchedule('q', { ...s, nextAt: 2000, body: '{}' }, 3000, []), null);
      // The enqueue path: a duplicate id is refused in its result, a debounce id debounces.
      const next = { ...s, nextAt: 2000 };
      assert.deepEqual(
        await storeOf(c).fireSchedule('q', next, 3000, [
          newMessage('tick:1000'),
          newMessage('d1', { debounceId: 'deb', initialBackoffMs: 60_000 }),
          newMessage('d2', { debounceId: 'deb', initialBackoffMs: 60_000 }),
        ]),
        [
          { ok: false, id: 'tick:1000', state: 'queued' },
          { ok: true, id: 'd1', action: 'added' },
          { ok: true, id: 'd1', action: 'debounced' },
        ],
      );
      assert.equal(await storeOf(c).fireSchedule('q', { ...s, nextAt: 9 }, 10, []), null);
      await storeOf(c).removeSchedule('q', 'tick');
      assert.equal(await storeOf(c).fireSchedule('q', { ...s, nextAt: 3000 }, 4000, [newMessage('x')]), null);
      assert.equal(await c.status('q', 'x'), null);
      const events = (await c.readEvents('q')).events.map((e) => `${e.type} ${e.id}`);
      assert.deepEqual(events, ['enqueued tick:1000', 'enqueued d1', 'enqueued d1']);
    });
  });
}
