/**
 * Listing `queued` on etcd walks the ordered queue in windows of idx time from a hint (src/stores/etcd/ordered-walk.ts):
 * pages come in queue order, whole, whatever the hint says: none, one older than the head, one newer than
 * some keys (those are read first), and the walk leaves the head it found as the next hint.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Client } from '../src/index.js';
import type { EtcdStore } from '../src/stores/etcd/store.js';
import { idxAt } from '../src/stores/etcd/keys.js';
import { headHintKey } from '../src/stores/etcd/ordered-walk.js';
import { closedAfterAll, isolatedUrl } from './fixtures/etcd-support.js';
import { listAll } from './support/list-pages.js';

const opened = closedAfterAll();

async function setup(): Promise<{ s: EtcdStore; c: Client; q: string; ids: string[] }> {
  const url = isolatedUrl();
  const s = await opened.store(url);
  const c = await opened.client(url);
  const q = 'walked';
  const ids: string[] = [];
  // Groups apart in time, so the walk crosses empty windows and dense ones.
  for (const [group, pause] of [
    [0, 0],
    [1, 30],
    [2, 400],
    [3, 5],
  ] as const) {
    await new Promise((resolve) => setTimeout(resolve, pause));
    const batch = Array.from({ length: 12 }, (_, i) => `g${group}-${String(i).padStart(2, '0')}`);
    for (const id of batch) await c.enqueue(q, id, { id });
    ids.push(...batch);
  }
  return { s, c, q, ids };
}

/** Every queued id, page by page. */
async function queuedIds(c: Client, q: string, limit: number): Promise<string[]> {
  return (await listAll(c, q, { state: 'queued', limit })).map((m) => m.id);
}

async function setHint(s: EtcdStore, q: string, value: string): Promise<void> {
  await s.kv.txn({
    compare: [],
    success: [{ type: 'put', key: headHintKey(s.keys(q)), value: Buffer.from(value, 'latin1') }],
  });
}

async function hint(s: EtcdStore, q: string): Promise<string | undefined> {
  return (await s.kv.range({ key: headHintKey(s.keys(q)) })).kvs[0]?.value.toString('latin1');
}

void describe('etcd ordered walk', () => {
  void test('pages come whole and in order, without a hint and after the hint it leaves', async () => {
    const { s, c, q, ids } = await setup();
    assert.equal(await hint(s, q), undefined);
    assert.deepEqual(await queuedIds(c, q, 7), ids);
    const left = await hint(s, q);
    assert.ok(left?.endsWith('/g0-00'), `the hint is the head: ${left}`);
    assert.deepEqual(await queuedIds(c, q, 5), ids);
    assert.deepEqual(await queuedIds(c, q, 100), ids);
  });

  void test('a hint older than the queue costs empty windows only; a newer one misses nothing', async () => {
    const { s, c, q, ids } = await setup();
    await setHint(s, q, s.keys(q).prefix + idxAt(Date.now() - 3600_000));
    assert.deepEqual(await queuedIds(c, q, 7), ids);
    // Newer than every key but the last group's: the older ones are read first, from their own range.
    const page = await c.list(q, { state: 'queued', limit: 100 });
    assert.equal(page.messages.length, ids.length);
    await setHint(s, q, s.keys(q).prefix + idxAt(Date.now() - 10));
    assert.deepEqual(await queuedIds(c, q, 9), ids);
    assert.ok((await hint(s, q))?.endsWith('/g0-00'), 'the hint went back to the head');
  });

  void test('finished messages leave the head: the walk finds the next one', async () => {
    const { c, q, ids } = await setup();
    assert.deepEqual(await queuedIds(c, q, 50), ids);
    for (const id of ids.slice(0, 20)) await c.remove(q, id);
    assert.deepEqual(await queuedIds(c, q, 6), ids.slice(20));
    const first = (await c.list(q, { state: 'queued', limit: 1 })).messages[0]?.id;
    assert.equal(first, ids[20]);
  });
});
