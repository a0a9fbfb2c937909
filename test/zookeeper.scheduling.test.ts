/**
 * Issue 13 on ZooKeeper, at the store: priorities (a sub-queue per filter class and priority), debounce,
 * group concurrency, rate limits (queue-wide and per group) and schedules, on the server `npm test` started.
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { connect, type Client } from '../src/index.js';
import { freshStoreUrl, hostsOf, PlainClient, serverUrl } from './fixtures/zookeeper-env.js';
import { waitFor } from './support/wait.js';
import { passedOverByRefills } from './support/priority-refill.js';
import { slowLink } from './support/slow-link.js';
import type { ClaimRequest, NewMessage } from '../src/stores/contract/contract.js';
import { plainMessage } from '../src/stores/contract/new-message.js';
import type { StoreContext } from '../src/stores/zookeeper/context.js';
import { storeOf } from '../src/client/client-store.js';

const server = serverUrl();
const clients: Client[] = [];
let plain: Promise<PlainClient> | null = null;

after(async () => {
  await Promise.all(clients.map((c) => c.close()));
  if (plain !== null) (await plain).close();
});

async function open(): Promise<{ client: Client; url: string; plain: PlainClient }> {
  plain ??= PlainClient.connect(hostsOf(server));
  const p = await plain;
  const url = await freshStoreUrl(server, p);
  const client = await connect(url, { maintenance: false });
  clients.push(client);
  return { client, url, plain: p };
}

function request(consumerId: string, max: number, accepts: ClaimRequest['accepts'] = null): ClaimRequest {
  return { consumerId, max, lockMs: 30_000, accepts, eoqBackoffMs: () => 50 };
}

async function claimIds(client: Client, queue: string, max: number, accepts: ClaimRequest['accepts'] = null) {
  const result = await storeOf(client).claim(queue, request('c1', max, accepts));
  return result.messages.map((m) => m.id);
}

describe('zookeeper scheduling: priority', () => {
  test('claims take the lowest priority number first, oldest first within one', async () => {
    const { client } = await open();
    await client.enqueue('q', 'a', { id: 'p5-a', priority: 5 });
    await client.enqueue('q', 'b', { id: 'p0-a' });
    await client.enqueue('q', 'c', { id: 'p1000-a', priority: 1000 });
    await client.enqueue('q', 'd', { id: 'p5-b', priority: 5 });
    await client.enqueue('q', 'e', { id: 'p0-b', priority: 0 });
    await client.enqueue('q', 'f', { id: 'p1-a', priority: 1 });
    const order: string[] = [];
    for (let i = 0; i < 6; i++) order.push(...(await claimIds(client, 'q', 1)));
    assert.deepEqual(order, ['p0-a', 'p0-b', 'p1-a', 'p5-a', 'p5-b', 'p1000-a']);
  });

  test('a batch claim is in priority order across filter classes, never outside the filters', async () => {
    const { client } = await open();
    await client.configure('f', { filterEnums: { size: ['s', 'm'] } });
    await client.enqueue('f', 1, { id: 'm-low', priority: 9, filters: { size: 'm' } });
    await client.enqueue('f', 2, { id: 's-low', priority: 9, filters: { size: 's' } });
    await client.enqueue('f', 3, { id: 'm-high', priority: 2, filters: { size: 'm' } });
    await client.enqueue('f', 4, { id: 's-high', priority: 3, filters: { size: 's' } });
    await client.enqueue('f', 5, { id: 'none-mid', priority: 4 });
    const onlyS = (c: string) => c === 'size=s';
    assert.deepEqual(await claimIds(client, 'f', 1, onlyS), ['s-high']);
    assert.deepEqual(await claimIds(client, 'f', 10), ['m-high', 'none-mid', 'm-low', 's-low']);
  });

  test('the layout: a sub-queue per filter class and priority; plain messages stay in the class node', async () => {
    const { client, url, plain: p } = await open();
    await client.enqueue('l', 'x', { id: 'plain' });
    await client.enqueue('l', 'y', { id: 'urgent', priority: 7 });
    const dir = new URL(url).pathname;
    const subs = (await p.children(`${dir}/l/queue`)).sort();
    assert.deepEqual(subs, ['none', 'none~0007']);
    const details = await client.show('l', 'urgent');
    assert.equal(details?.priority, 7);
    assert.equal((await client.show('l', 'plain'))?.priority, 0);
  });

  test('a claim filled by the highest level never lists the entries of lower ones', async () => {
    const { client } = await open();
    await client.enqueueBatch('deep', [
      ...Array.from({ length: 5 }, (_, i) => ({ payload: i, id: `high${i}`, priority: 1 })),
      ...Array.from({ length: 50 }, (_, i) => ({ payload: i, id: `low${i}`, priority: 9 })),
    ]);
    assert.deepEqual(await claimIds(client, 'deep', 1), ['high0']);
    const ctx = (storeOf(client) as unknown as { ctx: StoreContext }).ctx;
    const q = ctx.queue('deep');
    assert.notEqual(q.sub('', 1).peekBuckets(), null, 'the highest level was read');
    assert.equal(q.sub('', 9).peekBuckets(), null, 'the lower level was only counted');
  });

  test('a retried or requeued message keeps its priority', async () => {
    const { client } = await open();
    await client.enqueue('r', 'x', { id: 'low', priority: 50 });
    await client.enqueue('r', 'y', { id: 'high', priority: 1 });
    const [first] = (await storeOf(client).claim('r', request('c1', 1))).messages;
    assert.equal(first?.id, 'high');
    const finished = await storeOf(client).finish('r', 'c1', [
      { id: 'high', attempt: 1, outcome: 'retry', backoffMs: 0, error: 'again', startedAt: Date.now() },
    ]);
    assert.deepEqual(finished, ['ok']);
    assert.deepEqual(await claimIds(client, 'r', 1), ['high']);
    assert.equal((await client.show('r', 'high'))?.priority, 1);
  });
});

describe('zookeeper scheduling: debounce', () => {
  test('a burst becomes one message with the last payload, ready after the last enqueue', async () => {
    const { client } = await open();
    const first = await client.enqueue('d', 'one', { id: 'm1', debounce: { id: 'key', ms: 300 } });
    const second = await client.enqueue('d', 'two', { id: 'm2', debounce: { id: 'key', ms: 300 } });
    const [third] = await client.enqueueBatch('d', [
      { payload: 'three', id: 'm3', metadata: { n: 3 }, debounce: { id: 'key', ms: 300 } },
    ]);
    assert.deepEqual(first, { ok: true, id: 'm1', action: 'added' });
    assert.deepEqual(second, { ok: true, id: 'm1', action: 'debounced' });
    assert.deepEqual(third, { ok: true, id: 'm1', action: 'debounced' });
    assert.equal(await client.status('d', 'm2'), null);
    const status = await client.status('d', 'm1');
    assert.equal(status?.state, 'queued-with-backoff');
    assert.deepEqual(await claimIds(client, 'd', 10), []);
    let claimed: string[] = [];
    for (let i = 0; i < 50 && claimed.length === 0; i++) {
      await new Promise((r) => setTimeout(r, 20));
      claimed = await claimIds(client, 'd', 10);
    }
    assert.deepEqual(claimed, ['m1']);
    const details = await client.show('d', 'm1');
    assert.equal(details?.payload, 'three');
    assert.deepEqual(details.metadata, { n: 3 });
  });

  test('once the waiting message runs, the same debounce id adds a new one', async () => {
    const { client } = await open();
    await client.enqueue('d2', 'a', { id: 'a', debounce: { id: 'k', ms: 0 } });
    assert.deepEqual(await claimIds(client, 'd2', 1), ['a']);
    const next = await client.enqueue('d2', 'b', { id: 'b', debounce: { id: 'k', ms: 0 } });
    assert.deepEqual(next, { ok: true, id: 'b', action: 'added' });
    const again = await client.enqueue('d2', 'c', { id: 'c', debounce: { id: 'k', ms: 0 } });
    assert.deepEqual(again, { ok: true, id: 'b', action: 'debounced' });
  });

  test('racing enqueues of one debounce id leave exactly one waiting message', async () => {
    const { client, url } = await open();
    const other = await connect(url, { maintenance: false });
    clients.push(other);
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        (i % 2 === 0 ? client : other).enqueue('race', i, { id: `r${i}`, debounce: { id: 'k', ms: 60_000 } }),
      ),
    );
    const added = results.filter((r) => r.ok && r.action === 'added');
    assert.equal(added.length, 1);
    assert.ok(results.every((r) => r.ok && r.id === added[0]?.id));
    assert.equal((await client.queueStatus('race')).total, 1);
  });

  test('the index node goes with its message (remove) and with clear', async () => {
    const { client, url, plain: p } = await open();
    const dir = new URL(url).pathname;
    await client.enqueue('ix', 'a', { id: 'a', debounce: { id: 'k1', ms: 60_000 } });
    await client.enqueue('ix', 'b', { id: 'b', debounce: { id: 'k2', ms: 60_000 } });
    assert.deepEqual((await p.children(`${dir}/ix/debounce`)).sort(), ['k1', 'k2']);
    assert.equal((await client.remove('ix', 'a')).ok, true);
    assert.deepEqual(await p.children(`${dir}/ix/debounce`), ['k2']);
    await client.clear('ix');
    assert.deepEqual(await p.children(`${dir}/ix/debounce`), []);
  });

  test('GC removes the index node with the finished message it names', async () => {
    const { client, url, plain: p } = await open();
    const dir = new URL(url).pathname;
    await client.configure('g', { gcLifetimeMs: 0 });
    await client.enqueue('g', 'a', { id: 'a', debounce: { id: 'k', ms: 0 } });
    const [m] = (await storeOf(client).claim('g', request('c1', 1))).messages;
    assert.equal(m?.id, 'a');
    await storeOf(client).finish('g', 'c1', [
      { id: 'a', attempt: 1, outcome: 'success', backoffMs: 0, error: null, startedAt: Date.now() },
    ]);
    assert.deepEqual(await p.children(`${dir}/g/debounce`), ['k']);
    await client.gc('g');
    assert.equal(await client.status('g', 'a'), null);
    assert.deepEqual(await p.children(`${dir}/g/debounce`), []);
  });
});

describe('zookeeper scheduling: group concurrency', () => {
  const success = (id: string, attempt = 1) => ({
    id,
    attempt,
    outcome: 'success' as const,
    backoffMs: 0,
    error: null,
    startedAt: Date.now(),
  });

  test('a full group is skipped while other groups and ungrouped messages flow', async () => {
    const { client } = await open();
    await client.configure('g', { groupConcurrency: 2 });
    for (let i = 0; i < 4; i++) await client.enqueue('g', i, { id: `a${i}`, group: 'A' });
    for (let i = 0; i < 2; i++) await client.enqueue('g', i, { id: `b${i}`, group: 'B' });
    await client.enqueue('g', 'x', { id: 'plain' });
    const first = await claimIds(client, 'g', 10);
    assert.deepEqual(first.sort(), ['a0', 'a1', 'b0', 'b1', 'plain']);
    assert.deepEqual(await claimIds(client, 'g', 10), []);
    assert.equal((await client.show('g', 'a0'))?.group, 'A');
    await storeOf(client).finish('g', 'c1', [success('a0')]);
    assert.deepEqual(await claimIds(client, 'g', 10), ['a2']);
    await client.configure('g', { groupConcurrency: 3 });
    assert.deepEqual(await claimIds(client, 'g', 10), ['a3']);
  });

  test('GC deletes the nodes of groups that hold no message; a group still holding one keeps its node', async () => {
    const { client, url, plain: p } = await open();
    const dir = `${new URL(url).pathname}/pg/groups`;
    await client.configure('pg', { groupConcurrency: 1 });
    await client.enqueueBatch('pg', [
      { payload: 1, id: 'a1', group: 'A' },
      { payload: 2, id: 'b1', group: 'B' },
      { payload: 3, id: 'a2', group: 'A' },
    ]);
    assert.deepEqual((await claimIds(client, 'pg', 10)).sort(), ['a1', 'b1']);
    await storeOf(client).finish('pg', 'c1', [success('b1')]);
    assert.deepEqual((await p.children(dir)).sort(), ['A', 'B']);
    await client.gc('pg');
    assert.deepEqual(await p.children(dir), ['A'], "B's node went; A holds a1");
    await storeOf(client).finish('pg', 'c1', [success('a1')]);
    assert.deepEqual(await claimIds(client, 'pg', 10), ['a2'], 'the group still limits after its node came back');
    await client.enqueue('pg', 4, { id: 'b2', group: 'B' });
    assert.deepEqual(await claimIds(client, 'pg', 10), ['b2'], 'a pruned group is made again by its next claim');
    assert.deepEqual(await claimIds(client, 'pg', 10), []);
    await storeOf(client).finish('pg', 'c1', [success('a2'), success('b2')]);
    await client.gc('pg');
    assert.deepEqual(await p.children(dir), []);
  });

  test("a claim racing the GC that prunes its emptied group still takes the group's next message", async () => {
    const { client, url } = await open();
    const gc = await connect(url, { maintenance: false });
    clients.push(gc);
    const ctx = (storeOf(gc) as unknown as { ctx: StoreContext }).ctx;
    const groups = ctx.queue('race').paths.groups;
    await client.configure('race', { groupConcurrency: 1 });
    // Each round: a group's first message claimed and finished, so its node holds nothing; then its second
    // claimed while another session deletes that node as GC does (groups.ts, pruneGroups), again and again. The
    // claim reads the node and may find it gone by the time its multi goes.
    let removed = 0;
    for (let round = 0; round < 40; round++) {
      const group = `G${round}`;
      await client.enqueueBatch('race', [
        { payload: 1, id: `${group}-1`, group },
        { payload: 2, id: `${group}-2`, group },
      ]);
      assert.deepEqual(await claimIds(client, 'race', 10), [`${group}-1`]);
      await storeOf(client).finish('race', 'c1', [success(`${group}-1`)]);
      let claiming = true;
      const pruning = (async () => {
        while (claiming) {
          await ctx.zk.remove(`${groups}/${group}`, -1).then(
            () => (removed += 1),
            () => undefined,
          );
        }
      })();
      const claimed = await claimIds(client, 'race', 10).finally(() => (claiming = false));
      await pruning;
      assert.deepEqual(claimed, [`${group}-2`], `round ${round}, nodes removed so far ${removed}`);
      await storeOf(client).finish('race', 'c1', [success(`${group}-2`)]);
    }
    assert.ok(removed > 0, 'the race was run: some group nodes were deleted while a claim was out');
  });

  test("a dead consumer's held messages leave its group at once (ephemeral nodes)", async () => {
    const { client, url } = await open();
    const doomed = await connect(url, { maintenance: false });
    await client.configure('eph', { groupConcurrency: 1 });
    await client.enqueue('eph', 1, { id: 'e1', group: 'G' });
    await client.enqueue('eph', 2, { id: 'e2', group: 'G' });
    const [held] = (await storeOf(doomed).claim('eph', request('dying', 1))).messages;
    assert.equal(held?.id, 'e1');
    assert.deepEqual(await claimIds(client, 'eph', 2), []);
    // Its session ends with the client: its claim and its place in the group go, and the group has room for one.
    // This client learns of it by the group's watch, which may land a moment after the close: far within the
    // 30 s lock, which is what "at once" is measured against.
    await doomed.close();
    const taken = await waitFor(
      async () => {
        const ids = await claimIds(client, 'eph', 2);
        return ids.length > 0 ? ids : null;
      },
      { what: 'a claim once the dead session left group G' },
    );
    assert.deepEqual(taken, ['e1']);
  });

  test('claims racing across clients never hold more than groupConcurrency of a group', async () => {
    const { client, url } = await open();
    const other = await connect(url, { maintenance: false });
    clients.push(other);
    await client.configure('race', { groupConcurrency: 3 });
    await client.enqueueBatch(
      'race',
      Array.from({ length: 20 }, (_, i) => ({ payload: i, id: `m${i}`, group: 'G' })),
    );
    const claims = await Promise.all(
      Array.from({ length: 8 }, (_, i) => storeOf(i % 2 === 0 ? client : other).claim('race', request(`c${i}`, 2))),
    );
    const held = claims.flatMap((c) => c.messages.map((m) => m.id));
    assert.equal(held.length, 3);
  });

  test('a finish in a full group wakes idle subscribers of another client', async () => {
    const { client, url } = await open();
    const other = await connect(url, { maintenance: false });
    clients.push(other);
    await client.configure('w', { groupConcurrency: 1 });
    await client.enqueue('w', 1, { id: 'w1', group: 'G' });
    await client.enqueue('w', 2, { id: 'w2', group: 'G' });
    assert.deepEqual(await claimIds(client, 'w', 1), ['w1']);
    // The other client finds the group full, so it watches the group.
    assert.deepEqual((await storeOf(other).claim('w', request('c2', 1))).messages, []);
    let woken = 0;
    const stop = storeOf(other).subscribe('w', () => {
      woken += 1;
    });
    try {
      await storeOf(client).finish('w', 'c1', [success('w1')]);
      for (let i = 0; i < 100 && woken === 0; i++) await new Promise((r) => setTimeout(r, 20));
      assert.ok(woken > 0, 'the idle client was woken');
      assert.deepEqual(
        (await storeOf(other).claim('w', request('c2', 1))).messages.map((m) => m.id),
        ['w2'],
      );
    } finally {
      stop();
    }
  });
});

describe('zookeeper scheduling: rate limit', () => {
  test('a claim takes at most what the limit grants, then says when the next slot comes', async () => {
    const { client } = await open();
    await client.configure('r', { rateLimit: { max: 3, perMs: 900 } });
    await client.enqueueBatch(
      'r',
      Array.from({ length: 10 }, (_, i) => ({ payload: i, id: `m${i}` })),
    );
    const first = await storeOf(client).claim('r', request('c1', 10));
    assert.equal(first.messages.length, 3);
    const before = Date.now();
    const held = await storeOf(client).claim('r', request('c1', 10));
    assert.equal(held.messages.length, 0);
    assert.equal(held.dryRuns, 0, 'a rate-limited claim is no dry run');
    assert.ok(held.wakeAt !== null && held.wakeAt > before && held.wakeAt <= before + 300 + 50, `${held.wakeAt}`);
    await new Promise((r) => setTimeout(r, Math.max(0, (held.wakeAt ?? 0) - Date.now()) + 5));
    assert.equal((await storeOf(client).claim('r', request('c1', 10))).messages.length, 1);
  });

  test('the limit holds across clients racing for the same slots', async () => {
    const { client, url } = await open();
    const other = await connect(url, { maintenance: false });
    clients.push(other);
    await client.configure('race', { rateLimit: { max: 5, perMs: 60_000 } });
    await client.enqueueBatch(
      'race',
      Array.from({ length: 30 }, (_, i) => ({ payload: i, id: `m${i}` })),
    );
    let total = 0;
    for (let round = 0; round < 5; round++) {
      const claims = await Promise.all(
        Array.from({ length: 6 }, (_, i) => storeOf(i % 2 === 0 ? client : other).claim('race', request(`c${i}`, 2))),
      );
      total += claims.reduce((n, c) => n + c.messages.length, 0);
    }
    assert.equal(total, 5);
  });

  test('clear starts the limit afresh', async () => {
    const { client } = await open();
    await client.configure('c', { rateLimit: { max: 2, perMs: 60_000 } });
    await client.enqueueBatch('c', [{ payload: 1 }, { payload: 2 }, { payload: 3 }]);
    assert.equal((await storeOf(client).claim('c', request('c1', 10))).messages.length, 2);
    await client.clear('c');
    await client.enqueueBatch('c', [{ payload: 1 }, { payload: 2 }, { payload: 3 }]);
    assert.equal((await storeOf(client).claim('c', request('c1', 10))).messages.length, 2);
  });
});

describe('zookeeper scheduling: group rate limit', () => {
  test('a group waits for its slot while others flow, with no dry run; one start per slot across clients', async () => {
    const { client, url } = await open();
    const other = await connect(url, { maintenance: false });
    clients.push(other);
    await client.configure('gr', { groupRateLimit: { max: 1, perMs: 60_000 } });
    await client.enqueueBatch('gr', [
      ...Array.from({ length: 6 }, (_, i) => ({ payload: i, id: `a${i}`, group: 'a' })),
      { payload: 'b', id: 'b0', group: 'b' },
      { payload: 'p', id: 'p0' },
    ]);
    const claims = await Promise.all(
      Array.from({ length: 6 }, (_, i) => storeOf(i % 2 === 0 ? client : other).claim('gr', request(`c${i}`, 2))),
    );
    const ids = claims.flatMap((c) => c.messages.map((m) => m.id)).sort();
    assert.deepEqual(ids.filter((id) => id.startsWith('a')).length, 1, ids.join(','));
    assert.deepEqual(
      ids.filter((id) => !id.startsWith('a')),
      ['b0', 'p0'],
    );
    const before = Date.now();
    const waiting = await storeOf(client).claim('gr', request('c1', 10));
    assert.deepEqual(waiting.messages, []);
    assert.equal(waiting.dryRuns, 0, 'a claim that finds only groups waiting for their rate is no dry run');
    // Not before the group's slot or a held message's lock ends (30 s).
    assert.ok(waiting.wakeAt !== null && waiting.wakeAt > before + 20_000, `${(waiting.wakeAt ?? 0) - before}`);
  });

  test("GC deletes the node of a group whose next start has come; lifting the limit frees the group's messages", async () => {
    const { client, url, plain: p } = await open();
    const dir = `${new URL(url).pathname}/g/group-rates`;
    await client.configure('g', { groupRateLimit: { max: 1, perMs: 300 } });
    await client.enqueueBatch('g', [
      { payload: 1, id: 'x1', group: 'x' },
      { payload: 2, id: 'x2', group: 'x' },
      { payload: 3, id: 'x3', group: 'x' },
      { payload: 4, id: 'y1', group: 'y' },
    ]);
    assert.deepEqual((await claimIds(client, 'g', 10)).sort(), ['x1', 'y1']);
    assert.deepEqual((await p.children(dir)).sort(), ['x', 'y']);
    await client.gc('g');
    assert.deepEqual((await p.children(dir)).sort(), ['x', 'y'], 'nodes whose time is still to come stay');
    await waitFor(async () => (await claimIds(client, 'g', 10)).includes('x2'), { timeoutMs: 5000 });
    await new Promise((r) => setTimeout(r, 350));
    await client.gc('g');
    assert.deepEqual(await p.children(dir), []);
    await client.configure('g', { groupRateLimit: { max: 1, perMs: 60_000 } });
    assert.deepEqual(await claimIds(client, 'g', 10), ['x3']);
    await client.enqueue('g', 4, { id: 'x4', group: 'x' });
    assert.deepEqual(await claimIds(client, 'g', 10), []);
    await client.configure('g', { groupRateLimit: null });
    assert.deepEqual(await claimIds(client, 'g', 10), ['x4']);
  });
});

describe('zookeeper scheduling: schedules', () => {
  const message = (id: string, extra: Partial<NewMessage> = {}): NewMessage =>
    plainMessage(id, Buffer.from(JSON.stringify(id)), extra);

  test('put, list sorted by name, replace, remove; clear keeps them', async () => {
    const { client } = await open();
    const store = storeOf(client);
    assert.deepEqual(await store.schedules('s'), []);
    assert.equal(await store.putSchedule('s', { name: 'b', body: '{"every":1}', nextAt: 10 }), true);
    assert.equal(await store.putSchedule('s', { name: 'a', body: '{"every":2}', nextAt: 20 }), true);
    assert.equal(await store.putSchedule('s', { name: 'b', body: '{"every":3}', nextAt: 30 }), false);
    assert.deepEqual(await store.schedules('s'), [
      { name: 'a', body: '{"every":2}', nextAt: 20 },
      { name: 'b', body: '{"every":3}', nextAt: 30 },
    ]);
    await client.clear('s');
    assert.equal((await store.schedules('s')).length, 2);
    assert.equal(await store.removeSchedule('s', 'a'), true);
    assert.equal(await store.removeSchedule('s', 'a'), false);
    assert.deepEqual(
      (await store.schedules('s')).map((s) => s.name),
      ['b'],
    );
  });

  test('fireSchedule: one of racing firings enqueues the slot; a stale one writes nothing', async () => {
    const { client, url } = await open();
    const other = await connect(url, { maintenance: false });
    clients.push(other);
    const schedule = { name: 'tick', body: '{"everyMs":1000}', nextAt: 1000 };
    await storeOf(client).putSchedule('f', schedule);
    const fired = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        storeOf(i % 2 === 0 ? client : other).fireSchedule('f', schedule, 2000, [message(`tick-1000-${i}`)]),
      ),
    );
    const won = fired.filter((r) => r !== null);
    assert.equal(won.length, 1);
    assert.equal(won[0]?.[0]?.ok, true);
    assert.equal((await client.queueStatus('f')).total, 1);
    assert.deepEqual(await storeOf(client).schedules('f'), [{ ...schedule, nextAt: 2000 }]);
    // Expecting the old slot again: nothing written.
    assert.equal(await storeOf(client).fireSchedule('f', schedule, 3000, [message('late')]), null);
    assert.equal(await client.status('f', 'late'), null);
    // A changed body fails the compare too; a removed schedule as well.
    const moved = { ...schedule, nextAt: 2000 };
    assert.equal(await storeOf(client).fireSchedule('f', { ...moved, body: '{}' }, 3000, [message('x')]), null);
    await storeOf(client).removeSchedule('f', 'tick');
    assert.equal(await storeOf(client).fireSchedule('f', moved, 3000, [message('y')]), null);
    assert.equal((await client.queueStatus('f')).total, 1);
  });

  test('fireSchedule enqueues as enqueue does: existing ids refused, priority and debounce kept', async () => {
    const { client } = await open();
    const schedule = { name: 'n', body: 'b', nextAt: 1 };
    await storeOf(client).putSchedule('e', schedule);
    await client.enqueue('e', 'x', { id: 'slot-1', initialBackoffMs: 60_000 });
    const results = await storeOf(client).fireSchedule('e', schedule, 2, [
      message('slot-1'),
      message('slot-2', { priority: 3 }),
      message('slot-3', { debounceId: 'k', initialBackoffMs: 60_000 }),
    ]);
    assert.deepEqual(results, [
      { ok: false, id: 'slot-1', state: 'queued-with-backoff' },
      { ok: true, id: 'slot-2', action: 'added' },
      { ok: true, id: 'slot-3', action: 'added' },
    ]);
    assert.equal((await client.show('e', 'slot-2'))?.priority, 3);
    // Every id exists: the compare-and-set still decides, alone.
    const again = await storeOf(client).fireSchedule('e', { ...schedule, nextAt: 2 }, 3, [message('slot-2')]);
    assert.deepEqual(again, [{ ok: false, id: 'slot-2', state: 'queued' }]);
    assert.equal((await storeOf(client).schedules('e'))[0]?.nextAt, 3);
  });
});

describe('zookeeper scheduling: priority under refills', () => {
  // The cached listings and the claims a finish makes ahead (handoff.ts) must not pass over a refilled level.
  test('a refill of a drained higher priority is never passed over by claims that start after it', async () => {
    const { client: producer, url } = await open();
    const consumer = await connect(url, { maintenance: false });
    clients.push(consumer);
    await producer.configure('refill', { events: true });
    const passedOver = await passedOverByRefills(
      producer,
      'refill',
      (handler) => consumer.worker('refill', handler, { concurrency: 8 }),
      { rounds: 12, low: 60, urgent: 12 },
    );
    assert.deepEqual(passedOver, [], 'priority-600 claims committed while refilled 500s waited');
  });
});

describe('zookeeper scheduling: sub-queues new to a claim', () => {
  // A claim chooses from the queue's view kept by a child watch on /queue. The consumer here hears from the server
  // 10 ms late (a slow link; a follower behind the leader is the same): the sub-queue another session just made
  // is not in its view yet when its next claim begins, and only the claim's multi can tell.
  test('a claim that starts after an enqueue made a new higher priority never passes it over', async () => {
    // Each round a priority no message used before: a sub-queue the consumer's view never listed.
    assert.deepEqual(await passedOverByNewSubs(10, () => false), []);
  });

  test('after a clear elsewhere, a sub-queue made again is listed afresh and never passed over', async () => {
    // Each round starts with a clear by the producer, which removes every sub-queue; priorities 1 and 1000 are made
    // again with the same versions as before (a cached listing or version check of the old nodes would pass).
    assert.deepEqual(await passedOverByNewSubs(6, () => true), []);
  });
});

describe('zookeeper scheduling: two claims of one process', () => {
  // A claim's checks of the higher levels must be the versions of the listings it chose from: here one claim
  // relists the refilled level while the other, begun in the same tick, chooses from the old listing (nothing
  // claimable there) and builds its multi only after that relist moved the version on.
  test('a claim choosing from an old listing never checks the version of a newer one', async () => {
    const { client: producer, url } = await open();
    const consumer = await connect(url, { maintenance: false });
    clients.push(consumer);
    const store = storeOf(consumer);
    const passedOver: string[] = [];
    for (let round = 0; round < 5; round++) {
      const queue = `two-${round}`;
      await producer.enqueueBatch(queue, [
        { payload: 0, id: 'u0', priority: 500 },
        { payload: 0, id: 'l0', priority: 600 },
      ]);
      // Warm: both levels listed, nothing left to read ahead.
      const warm = await store.claim(queue, request('warm', 2));
      assert.deepEqual(
        warm.messages.map((m) => m.id),
        ['u0', 'l0'],
      );
      await producer.enqueue(queue, 0, { id: 'l1', priority: 600 });
      await producer.enqueueBatch(queue, [
        { payload: 0, id: 'u1', priority: 500 },
        { payload: 0, id: 'u2', priority: 500 },
      ]);
      // Both watches have fired: the next claims list both levels again.
      await new Promise((resolve) => setTimeout(resolve, 100));
      const [first, second] = await Promise.all([
        store.claim(queue, request('first', 1)),
        store.claim(queue, request('second', 1)),
      ]);
      const taken = [...first.messages, ...second.messages].map((m) => m.id).sort();
      // Two claims of one each, two of priority 500 waiting since before they began: l1 must wait.
      if (taken.join() !== 'u1,u2') passedOver.push(`round ${round}: ${taken.join(',')}`);
    }
    assert.deepEqual(passedOver, [], 'a priority-600 claim committed while a 500 enqueued before it waited');
  });
});

/**
 * Rounds of: the producer enqueues two messages of priority 1000; the consumer (behind a 10 ms slow link) takes one;
 * the producer enqueues one of a higher priority (round + 1, or 1 after a clear), then the consumer claims at once.
 * Returns the rounds whose claim did not take the higher one.
 */
async function passedOverByNewSubs(rounds: number, clearFirst: (round: number) => boolean): Promise<string[]> {
  const { client: producer, url } = await open();
  const link = await slowLink(hostsOf(server), 10);
  const consumer = await connect(url.replace(hostsOf(server), link.address), { maintenance: false });
  const store = storeOf(consumer);
  const passedOver: string[] = [];
  try {
    for (let round = 0; round < rounds; round++) {
      const again = clearFirst(round);
      if (again) await producer.clear('fresh');
      await producer.enqueueBatch('fresh', [
        { payload: 0, id: `low-a${round}`, priority: 1000 },
        { payload: 0, id: `low-b${round}`, priority: 1000 },
      ]);
      // The consumer's view and listings are warm: it takes one, the other is its next candidate.
      const warm = await waitFor(async () => (await store.claim('fresh', request(`w${round}`, 1))).messages[0]?.id, {
        what: `round ${round}'s first message claimed`,
      });
      assert.equal(warm, `low-a${round}`);
      await producer.enqueue('fresh', 0, { id: `urgent${round}`, priority: again ? 1 : round + 1 });
      const taken = (await store.claim('fresh', request(`c${round}`, 1))).messages.map((m) => m.id);
      if (!taken.includes(`urgent${round}`)) passedOver.push(`round ${round}: ${taken.join(',') || 'nothing'}`);
      // Whatever is left is taken before the next round.
      await waitFor(async () => (await store.claim('fresh', request(`d${round}`, 10))).messages.length === 0, {
        what: `round ${round} drained`,
      });
    }
  } finally {
    await consumer.close();
    await link.close();
  }
  return passedOver;
}
