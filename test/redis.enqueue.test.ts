/**
 * Single enqueues on Redis travel in script calls of ENQUEUE_CALL_MESSAGES, each sent as soon as it is full,
 * several in flight on one connection: they are stored in the order they were made, a call that fails rejects
 * only its own callers, and an enqueueBatch is never split between calls.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { Redis } from 'ioredis';
import { StoreLayoutError, type Client, type EnqueueResult } from '../src/index.js';
import { storeOf } from '../src/client/client-store.js';
import { ENQUEUE_CALL_MESSAGES } from '../src/stores/redis/enqueue.js';
import { redisTestUrl, testPrefixes } from './fixtures/redis-server.js';

const base = redisTestUrl();
const admin = new Redis(base);
const prefixes = testPrefixes(base);
after(() => admin.disconnect());

async function open(label: string): Promise<{ client: Client; prefix: string }> {
  const prefix = prefixes.unique(label);
  return { client: await prefixes.open(`${base}?prefix=${prefix}`), prefix };
}

/** Every ready message's id, in the order claims hand them out. */
async function claimAll(client: Client, q: string): Promise<string[]> {
  const ids: string[] = [];
  for (;;) {
    const request = { consumerId: 'c', max: 100, lockMs: 60_000, accepts: null, eoqBackoffMs: () => 1000 };
    const { messages } = await storeOf(client).claim(q, request);
    if (messages.length === 0) return ids;
    for (const m of messages) ids.push(m.id);
  }
}

const id = (i: number): string => `m${String(i).padStart(4, '0')}`;

test('single enqueues with 64 in flight are claimed in the order they were made', async () => {
  const { client } = await open('order');
  const q = 'order';
  const n = 20 * ENQUEUE_CALL_MESSAGES + 7;
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < n) {
      const i = next++;
      assert.deepEqual(await client.enqueue(q, { i }, { id: id(i) }), { ok: true, id: id(i), action: 'added' });
    }
  };
  await Promise.all(Array.from({ length: 64 }, lane));
  assert.deepEqual(
    await claimAll(client, q),
    Array.from({ length: n }, (_, i) => id(i)),
  );
});

test('a call that fails rejects its own callers only, and stores none of their messages', async () => {
  const { client, prefix } = await open('fail');
  const q = 'fail';
  await client.enqueue(q, 'marks the layout', { id: 'first' });
  // A foreign key that only a message with a priority makes the script check: that message's call fails.
  await admin.set(`${prefix}:{${q}}:groups`, 'not kvmq');
  const bad = ENQUEUE_CALL_MESSAGES + 3;
  const n = 3 * ENQUEUE_CALL_MESSAGES;
  const settled = await Promise.allSettled(
    Array.from({ length: n }, (_, i) => client.enqueue(q, { i }, { id: id(i), priority: i === bad ? 1 : 0 })),
  );
  const failing = (i: number): boolean => i >= ENQUEUE_CALL_MESSAGES && i < 2 * ENQUEUE_CALL_MESSAGES;
  settled.forEach((s, i) => {
    if (failing(i)) {
      assert.ok(s.status === 'rejected' && s.reason instanceof StoreLayoutError, `message ${i}: ${s.status}`);
    } else {
      assert.deepEqual(s.status === 'fulfilled' && s.value, { ok: true, id: id(i), action: 'added' }, `message ${i}`);
    }
  });
  // Claims check that key too.
  await admin.del(`${prefix}:{${q}}:groups`);
  assert.deepEqual(await claimAll(client, q), [
    'first',
    ...Array.from({ length: n }, (_, i) => i)
      .filter((i) => !failing(i))
      .map(id),
  ]);
});

test('an enqueueBatch among single enqueues is sent whole in one call: it fails or is stored whole', async () => {
  const { client, prefix } = await open('batch');
  const q = 'batch';
  await client.enqueue(q, 'marks the layout', { id: 'first' });
  await admin.set(`${prefix}:{${q}}:groups`, 'not kvmq');
  const size = 2 * ENQUEUE_CALL_MESSAGES;
  const items = Array.from({ length: size }, (_, i) => ({ payload: i, id: `b${i}`, priority: i === size - 1 ? 1 : 0 }));
  const before = Array.from({ length: 5 }, (_, i) => client.enqueue(q, i, { id: `before${i}` }));
  const batch = client.enqueueBatch(q, items);
  const later = Array.from({ length: 5 }, (_, i) => client.enqueue(q, i, { id: `later${i}` }));
  // The batch filled the call it joined, which went at once with the singles before it; the later ones went next.
  const results = await Promise.allSettled([...before, batch, ...later]);
  assert.deepEqual(
    results.map((r) => r.status),
    [...Array<string>(6).fill('rejected'), ...Array<string>(5).fill('fulfilled')],
  );
  // Claims check that key too.
  await admin.del(`${prefix}:{${q}}:groups`);
  assert.deepEqual(await claimAll(client, q), ['first', ...Array.from({ length: 5 }, (_, i) => `later${i}`)]);
  // Without the foreign key, the same batch is stored whole, its results in order.
  const stored: EnqueueResult[] = await client.enqueueBatch(q, items);
  assert.deepEqual(
    stored.map((r) => r.ok && r.id),
    items.map((item) => item.id),
  );
});

test('a batch of several calls is sent at once: an enqueue made after it is stored after all of it', async () => {
  const { client } = await open('large');
  const q = 'large';
  // More than one call carries (5,000 messages), then a single enqueue in the same tick.
  const items = Array.from({ length: 5100 }, (_, i) => ({ payload: i, id: id(i) }));
  const [batch, single] = await Promise.all([
    client.enqueueBatch(q, items),
    client.enqueue(q, 'after', { id: 'after' }),
  ]);
  assert.deepEqual(
    batch.map((r) => r.ok && r.id),
    items.map((item) => item.id),
  );
  assert.deepEqual(single, { ok: true, id: 'after', action: 'added' });
  assert.deepEqual(await claimAll(client, q), [...items.map((item) => item.id), 'after']);
});
