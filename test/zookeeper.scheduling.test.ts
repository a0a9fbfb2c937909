/**
 * Issue 13 on ZooKeeper, at the store: priorities (a sub-queue per filter class and priority), debounce,
 * group concurrency, rate limits and schedules, on the server `npm test` started.
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { connect, type Client } from '../src/index.js';
import { freshStoreUrl, hostsOf, PlainClient, serverUrl } from './fixtures/zookeeper-env.js';
import type { ClaimRequest } from '../src/store/contract.js';

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
  const result = await client.store.claim(queue, request('c1', max, accepts));
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

  test('a retried or requeued message keeps its priority', async () => {
    const { client } = await open();
    await client.enqueue('r', 'x', { id: 'low', priority: 50 });
    await client.enqueue('r', 'y', { id: 'high', priority: 1 });
    const [first] = (await client.store.claim('r', request('c1', 1))).messages;
    assert.equal(first?.id, 'high');
    const finished = await client.store.finish('r', 'c1', [
      { id: 'high', attempt: 1, outcome: 'retry', backoffMs: 0, error: 'again', startedAt: Date.now() },
    ]);
    assert.deepEqual(finished, ['ok']);
    assert.deepEqual(await claimIds(client, 'r', 1), ['high']);
    assert.equal((await client.show('r', 'high'))?.priority, 1);
  });
});
