/**
 * Group commit of enqueues on etcd (src/etcd/txn-lane.ts): concurrent enqueue calls of a queue share Txns, a
 * full Txn carrying 63 two-op enqueues and the count slot, the rest waiting for the next calls instead of a Txn
 * of its own; and two calls enqueueing the same id never share a Txn (etcd refuses a key put twice in one).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EtcdStore } from '../src/etcd/store.js';
import { closedAfterAll, isolatedUrl } from './fixtures/etcd-support.js';

const TIMEOUT_MS = 60_000;
const opened = closedAfterAll();

function etcdStoreOf(store: unknown): EtcdStore {
  assert.ok(store instanceof EtcdStore);
  return store;
}

test(
  '64 enqueue calls in flight take one Txn per 63 messages, count slot included',
  { timeout: TIMEOUT_MS },
  async () => {
    const client = await opened.client(isolatedUrl());
    const { kv } = etcdStoreOf(client.store);
    const queue = 'lane';
    await client.enqueue(queue, 'warm-up');
    const revision = async (): Promise<number> => (await kv.range({ key: '/', limit: 1, keysOnly: true })).revision;
    const n = 63 * 10;
    const before = await revision();
    // 64 callers, each enqueueing again as soon as its message is stored, as a busy producer does.
    let next = 0;
    const caller = async (): Promise<void> => {
      while (next < n) {
        next += 1;
        const result = await client.enqueue(queue, { i: next });
        assert.equal(result.ok, true);
      }
    };
    await Promise.all(Array.from({ length: 64 }, caller));
    const txns = (await revision()) - before;
    // Each Txn is a revision. Were the overflow its own Txn, 64 calls would take two: 20 for these 630.
    assert.ok(txns <= n / 63 + 2, `${txns} Txns for ${n} enqueues`);
    assert.equal((await client.queueStatus(queue)).counts.queued, n + 1);
  },
);

test(
  'the same id in calls waiting together is stored once, the later call refused',
  { timeout: TIMEOUT_MS },
  async () => {
    const client = await opened.client(isolatedUrl());
    const queue = 'lane-dup';
    // 63 fill a Txn; `dup` waits for the next one, and the second call's `dup` may not join it.
    const items = Array.from({ length: 63 }, (_, i) => ({ payload: i, id: `m${i}` }));
    const [first, second] = await Promise.all([
      client.enqueueBatch(queue, [...items, { payload: 'first', id: 'dup' }]),
      client.enqueue(queue, 'second', { id: 'dup' }),
    ]);
    assert.ok(first.every((r) => r.ok));
    assert.deepEqual(second, { ok: false, id: 'dup', state: 'queued' });
    assert.equal((await client.queueStatus(queue)).counts.queued, 64);
    const message = await client.show(queue, 'dup');
    assert.equal(message?.payload, 'first');
  },
);
