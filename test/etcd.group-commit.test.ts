/**
 * Group commit of enqueues on etcd (src/stores/etcd/txn-lane.ts): concurrent enqueue calls of a queue share Txns, a
 * full Txn carrying 63 two-op enqueues and the count slot, the rest waiting for the next calls instead of a Txn
 * of its own; the rest of a burst of finishes held for the next burst; and two calls enqueueing the same id
 * never share a Txn (etcd refuses a key put twice in one). The client sends a tick's calls as one store call,
 * each caller resumed as soon as its own message's Txn is answered (enqueueEach).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { storeOf } from '../src/client/client-store.js';
import { EtcdStore } from '../src/stores/etcd/store.js';
import { TxnLane } from '../src/stores/etcd/txn-lane.js';
import type { Change } from '../src/stores/etcd/txn-batch.js';
import type { Kv } from '../src/stores/etcd/kv.js';
import { closedAfterAll, isolatedUrl } from './fixtures/etcd-support.js';

const TIMEOUT_MS = 60_000;
const opened = closedAfterAll();

function etcdStoreOf(store: unknown): EtcdStore {
  assert.ok(store instanceof EtcdStore);
  return store;
}

/**
 * Counts the Txns `kv` commits from now on that write under `prefix`: each is one revision of etcd's. Counted
 * here, not from the server's revision, which other test files sharing the server move too.
 */
function txnsWriting(kv: Kv, prefix: string): () => number {
  let count = 0;
  const txn = kv.txn.bind(kv);
  kv.txn = async (request) => {
    const result = await txn(request);
    const writes = request.success.some((op) => op.type !== 'range' && op.key.startsWith(prefix));
    if (result.succeeded && writes) count += 1;
    return result;
  };
  return () => count;
}

test(
  '64 enqueue calls in flight take one Txn per 63 messages, count slot included',
  { timeout: TIMEOUT_MS },
  async () => {
    const client = await opened.client(isolatedUrl());
    const store = etcdStoreOf(storeOf(client));
    const queue = 'lane';
    await client.enqueue(queue, 'warm-up');
    const txns = txnsWriting(store.kv, store.keys(queue).prefix);
    const n = 63 * 10;
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
    // Were the overflow its own Txn, 64 calls would take two: 20 for these 630.
    assert.ok(txns() <= n / 63 + 2, `${txns()} Txns for ${n} enqueues`);
    assert.equal((await client.queueStatus(queue)).counts.queued, n + 1);
  },
);

test(
  "one tick's enqueue calls are one store call, and the callers of the first full Txn resume before the rest",
  { timeout: TIMEOUT_MS },
  async () => {
    const client = await opened.client(isolatedUrl());
    const store = etcdStoreOf(storeOf(client));
    const queue = 'lane-each';
    await client.enqueue(queue, 'warm-up');
    const txns = txnsWriting(store.kv, store.keys(queue).prefix);
    let storeCalls = 0;
    const enqueueEach = store.enqueueEach.bind(store);
    store.enqueueEach = (q, messages) => {
      storeCalls += 1;
      return enqueueEach(q, messages);
    };
    // 70 calls in one tick: 63 fill a Txn with the count slot, 7 go in the next.
    const order: number[] = [];
    await Promise.all(Array.from({ length: 70 }, (_, i) => client.enqueue(queue, { i }).then(() => order.push(i))));
    assert.equal(storeCalls, 1);
    assert.equal(txns(), 2);
    assert.deepEqual(
      order.slice(0, 63).sort((a, b) => a - b),
      Array.from({ length: 63 }, (_, i) => i),
    );
    assert.equal((await client.queueStatus(queue)).counts.queued, 71);
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

test(
  'a lane with a hold keeps the rest of a full burst for the next burst, then both share one Txn',
  { timeout: TIMEOUT_MS },
  async () => {
    const client = await opened.client(isolatedUrl());
    const store = etcdStoreOf(storeOf(client));
    const { kv } = store;
    const prefix = store.keys('hold').prefix;
    const txns = txnsWriting(kv, prefix);
    // Two puts each: 64 fill a Txn.
    const change = (i: number): Change => ({
      compares: [],
      ops: [
        { type: 'put', key: `${prefix}a/${i}`, value: Buffer.from('a') },
        { type: 'put', key: `${prefix}b/${i}`, value: Buffer.from('b') },
      ],
      reads: [],
    });
    const lane = new TxnLane(kv, 5_000);
    const first = lane.run(Array.from({ length: 70 }, (_, i) => change(i)));
    // The full Txn goes; the 6 left wait, though nothing is in flight once it is answered.
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(txns(), 1);
    const second = lane.run(Array.from({ length: 58 }, (_, i) => change(70 + i)));
    // The next burst ends the hold: both go at once, not when the 5 s are over.
    const both = Promise.all([first, second]);
    const early = await Promise.race([both.then(() => true), new Promise((r) => setTimeout(() => r(false), 2_500))]);
    assert.equal(early, true, 'the held rest went with the next burst');
    const [a, b] = await both;
    assert.ok([...a, ...b].every((r) => r.ok));
    assert.equal(txns(), 2, 'the 6 rode with the next 58');
    const stored = await kv.range({ key: `${prefix}a/`, end: `${prefix}a0`, countOnly: true });
    assert.equal(stored.count, 128);
  },
);
