/**
 * Flows on Redis, as redis-cli sees them: the keys a flow writes, the layout mark that tells a finish to look
 * for flow children (and leaves plain queues without that look), and a flow refused by a foreign key, nothing
 * written.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { StoreLayoutError, type Client } from '../src/index.js';
import { storeOf } from '../src/client/client-store.js';
import { redisCli, redisTestUrl, testPrefixes } from './fixtures/redis-server.js';

const base = redisTestUrl();
const prefixes = testPrefixes(base);

/** A client on a fresh prefix, and the key `name` of queue `q` there. */
async function open(label: string): Promise<{ client: Client; key: (q: string, name: string) => string }> {
  const prefix = prefixes.unique(label);
  const client = await prefixes.open(`${base}?prefix=${prefix}`);
  return { client, key: (q, name) => `${prefix}:{${q}}:${name}` };
}

/** redis-cli against the test server, raw replies as lines. */
function cli(...args: string[]): string[] {
  return redisCli(base, ...args);
}

/** Claims and finishes `q`'s ready messages as successes, `max` at a time; returns the ids finished. */
async function finishReady(client: Client, q: string, max: number): Promise<string[]> {
  const store = storeOf(client);
  const claim = { consumerId: 'c', max, lockMs: 60_000, accepts: null, eoqBackoffMs: () => 1000 };
  const { messages } = await store.claim(q, claim);
  const finishes = messages.map((m) => ({
    id: m.id,
    attempt: m.attempt,
    outcome: 'success' as const,
    backoffMs: 0,
    error: null,
    startedAt: 1,
  }));
  assert.deepEqual(
    await store.finish(q, 'c', finishes),
    finishes.map(() => 'ok'),
  );
  return messages.map((m) => m.id);
}

/** The parent p/p of c/a (onChildFailure 'ignore') and of `bQueue`/b. */
async function ignoringParent(client: Client, bQueue: string): Promise<void> {
  await client.flow({
    queue: 'p',
    payload: 'p',
    id: 'p',
    children: [
      { queue: 'c', payload: 1, id: 'a', onChildFailure: 'ignore' },
      { queue: bQueue, payload: 2, id: 'b' },
    ],
  });
}

void describe('redis flows', () => {
  void test('the keys of a flow: the waiting parent, its count and children, each child its link', async () => {
    const { client, key } = await open('flow-keys');
    await client.flow({
      queue: 'p',
      payload: 'parent',
      id: 'root',
      runAt: new Date(Date.now() + 3_600_000),
      children: [
        { queue: 'c', payload: 1, id: 'a', onChildFailure: 'ignore' },
        { queue: 'p', payload: 2, id: 'b' },
      ],
    });
    const [score] = cli('ZSCORE', key('p', 'waiting-children'), 'root');
    assert.ok(Number(score) > Date.now() + 3_000_000, 'scored by its runAt');
    assert.equal(cli('HGET', key('p', 'children-left'), 'root')[0], '2');
    assert.deepEqual(cli('HGET', key('p', 'children'), 'root'), ['c a', 'p b']);
    assert.equal(cli('HGET', key('c', 'parent'), 'a')[0], 'i p root');
    assert.equal(cli('HGET', key('c', 'owes'), 'a')[0], 'i p root');
    assert.equal(cli('HGET', key('p', 'owes'), 'b')[0], 'f p root');
    // Not in a ready list nor the schedule until its children have ended.
    assert.deepEqual(cli('LRANGE', key('p', 'mid-circle'), '0', '-1'), ['b']);
    assert.equal(cli('ZSCORE', key('p', 'schedule'), 'root')[0], '');

    await finishReady(client, 'c', 10);
    assert.equal(cli('HEXISTS', key('c', 'owes'), 'a')[0], '0');
    assert.equal(cli('HGET', key('p', 'children-left'), 'root')[0], '1');
    await finishReady(client, 'p', 10);
    // Released: scheduled for its runAt, its links kept for the tree.
    assert.equal(cli('EXISTS', key('p', 'waiting-children'), key('p', 'children-left'))[0], '0');
    assert.equal((await client.status('p', 'root'))?.state, 'queued-with-backoff');
    assert.equal(cli('HGET', key('c', 'parent'), 'a')[0], 'i p root');
  });

  void test('the layout mark: 1f while a queue has messages that owe a count, 1 again after; plain queues stay 1', async () => {
    const { client, key } = await open('flow-mark');
    await client.enqueue('plain', 'x', { id: 'x' });
    await client.enqueue('kids', 'y', { id: 'y' });
    assert.equal(cli('GET', key('kids', 'layout'))[0], '1');
    await client.flow({
      queue: 'top',
      payload: 'p',
      id: 'p',
      children: [
        { queue: 'kids', payload: 1, id: 'k1' },
        { queue: 'kids', payload: 2, id: 'k2' },
      ],
    });
    assert.equal(cli('GET', key('kids', 'layout'))[0], '1f');
    assert.equal(cli('GET', key('plain', 'layout'))[0], '1');
    // A queue without its mark yet (never enqueued to): an enqueue that marks it sees the owed counts.
    await client.flow({ queue: 'top', payload: 'q', id: 'q', children: [{ queue: 'fresh', payload: 3, id: 'f' }] });
    assert.equal(cli('EXISTS', key('fresh', 'layout'))[0], '0');
    await client.enqueue('fresh', 'z', { id: 'z' });
    assert.equal(cli('GET', key('fresh', 'layout'))[0], '1f');

    await finishReady(client, 'plain', 10);
    assert.equal(cli('GET', key('plain', 'layout'))[0], '1');
    assert.deepEqual((await finishReady(client, 'kids', 10)).sort(), ['k1', 'k2', 'y']);
    assert.equal(cli('GET', key('kids', 'layout'))[0], '1');
    assert.equal((await client.status('top', 'p'))?.state, 'queued');
    assert.deepEqual((await finishReady(client, 'fresh', 10)).sort(), ['f', 'z']);
    assert.equal(cli('GET', key('fresh', 'layout'))[0], '1');
  });

  void test('a failed child retried while its parent waits owes its count again, and pays it once', async () => {
    const { client, key } = await open('flow-retry');
    await ignoringParent(client, 'c');
    const store = storeOf(client);
    const claim = { consumerId: 'c', max: 1, lockMs: 60_000, accepts: null, eoqBackoffMs: () => 1000 };
    const [first] = (await store.claim('c', claim)).messages;
    assert.equal(first?.id, 'a');
    const error = { id: 'a', attempt: 1, outcome: 'error' as const, backoffMs: 0, error: 'no', startedAt: 1 };
    assert.deepEqual(await store.finish('c', 'c', [error]), ['ok']);
    assert.equal(cli('HEXISTS', key('c', 'owes'), 'a')[0], '0');
    assert.equal(cli('HGET', key('p', 'children-left'), 'p')[0], '1');
    assert.deepEqual(await client.retry('c', 'a'), { ok: true, id: 'a', state: 'queued' });
    assert.equal(cli('HGET', key('c', 'owes'), 'a')[0], 'i p p');
    assert.equal(cli('HGET', key('p', 'children-left'), 'p')[0], '2');
    assert.deepEqual(await finishReady(client, 'c', 1), ['b']);
    assert.equal((await client.status('p', 'p'))?.state, 'waiting-children');
    assert.deepEqual(await finishReady(client, 'c', 1), ['a']);
    assert.equal((await client.status('p', 'p'))?.state, 'queued');
    // Paid once: it owes nothing now.
    assert.equal(cli('HEXISTS', key('c', 'owes'), 'a')[0], '0');
  });

  void test("clear of a child's queue ends its children for their parents in other queues, as removals", async () => {
    const { client, key } = await open('flow-clear');
    await ignoringParent(client, 'p');
    await client.flow({ queue: 'p', payload: 'q', id: 'q', children: [{ queue: 'c', payload: 3, id: 'x' }] });
    await client.clear('c');
    assert.equal(cli('EXISTS', key('c', 'owes'))[0], '0');
    assert.equal(cli('HGET', key('p', 'children-left'), 'p')[0], '1');
    const failed = await client.status('p', 'q');
    assert.equal(failed?.state, 'failed');
    assert.equal(failed.lastError, 'child c/x failed: removed');
    assert.deepEqual(await finishReady(client, 'p', 10), ['b']);
    assert.equal((await client.status('p', 'p'))?.state, 'queued');
  });

  void test('a child moved to a dead-letter queue has ended for its parent, and stays among its children', async () => {
    const { client, key } = await open('flow-dlq');
    await client.configure('c', { deadLetterQueue: 'dead' });
    await ignoringParent(client, 'p');
    const store = storeOf(client);
    const claim = { consumerId: 'c', max: 1, lockMs: 60_000, accepts: null, eoqBackoffMs: () => 1000 };
    assert.equal((await store.claim('c', claim)).messages[0]?.id, 'a');
    const error = { id: 'a', attempt: 1, outcome: 'error' as const, backoffMs: 0, error: 'no', startedAt: 1 };
    assert.deepEqual(await store.finish('c', 'c', [error]), ['ok']);
    assert.equal((await client.status('dead', 'a'))?.state, 'queued');
    assert.equal(cli('HGET', key('p', 'children-left'), 'p')[0], '1');
    assert.equal(cli('HGET', key('dead', 'parent'), 'a')[0], 'i p p');
    assert.equal(cli('HEXISTS', key('dead', 'owes'), 'a')[0], '0');
    const children = await store.flowChildren?.('p', 'p');
    assert.deepEqual(
      children?.map((child) => [child.queue, child.id, child.state]),
      [
        ['dead', 'a', 'queued'],
        ['p', 'b', 'queued'],
      ],
    );
    const tree = await client.getFlow('dead', 'a');
    assert.equal(tree?.id, 'p');
  });

  void test('a flow meeting a foreign key in any of its queues is refused, nothing written', async () => {
    const { client, key } = await open('flow-foreign');
    cli('SET', key('other', 'owes'), 'not kvmq');
    await assert.rejects(
      client.flow({ queue: 'home', payload: 'p', id: 'p', children: [{ queue: 'other', payload: 1, id: 'c' }] }),
      (error: unknown) => error instanceof StoreLayoutError && /:owes holds a string/.test(error.message),
    );
    assert.equal(
      cli('EXISTS', key('home', 'messages'), key('other', 'messages'), key('home', 'waiting-children'))[0],
      '0',
    );
  });
});
