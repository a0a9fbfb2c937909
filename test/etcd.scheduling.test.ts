/**
 * Scheduling on etcd (issue 13), in the store's own layout: priorities in the ordered queue's idx,
 * the debounce index, group concurrency and the rate limit decided by the dispatcher and kept in etcd,
 * and schedules compared and set with the enqueue in one Txn.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe } from 'node:test';
import { openEtcdStore } from '../src/etcd/store.js';
import { prefixEnd } from '../src/etcd/kv.js';
import { idxPriority } from '../src/etcd/keys.js';
import { storeTest } from './support/harness.js';
import { JobLog } from './support/jobs.js';
import { etcdTestUrl } from './fixtures/etcd-support.js';
import type { StoreFixture } from './support/fixture.js';

const base = etcdTestUrl();
const fixture: StoreFixture = {
  name: 'etcd',
  url: () => Promise.resolve(`${base}/t-${randomBytes(6).toString('hex')}`),
};

void describe('etcd scheduling', () => {
  storeTest(fixture, 'priority: lowest number first, oldest first within one, across filter classes', async (h) => {
    const q = h.queue('prio');
    await h.client.configure(q, { filterEnums: { tier: ['a', 'b'] } });
    const plan: [string, number, string | null][] = [
      ['p5-1', 5, null],
      ['p0-1', 0, 'a'],
      ['p1000-1', 1000, null],
      ['p5-2', 5, 'b'],
      ['p1-1', 1, 'b'],
      ['p0-2', 0, null],
      ['p1-2', 1, null],
    ];
    for (const [id, priority, tier] of plan) {
      await h.client.enqueue(q, id, { id, priority, ...(tier === null ? {} : { filters: { tier } }) });
    }
    const log = new JobLog();
    h.worker(q, (job) => log.record(job), { concurrency: 1 });
    await log.count(plan.length);
    assert.deepEqual(log.ids(), ['p0-1', 'p0-2', 'p1-1', 'p1-2', 'p5-1', 'p5-2', 'p1000-1']);
  });

  storeTest(fixture, 'priority: kept in the idx of the ordered key and shown by inspect with the group', async (h) => {
    const q = h.queue('prio-layout');
    await h.client.enqueue(q, 'x', { id: 'high', priority: 0 });
    await h.client.enqueue(q, 'x', { id: 'low', priority: 7, group: 'tenant-1' });
    const store = await openEtcdStore(h.url, () => undefined);
    h.cleanup(() => store.close());
    const keys = store.keys(q);
    const ordered = await store.kv.range({ key: keys.orderedStart, end: keys.orderedEnd, keysOnly: true });
    const found = ordered.kvs.map((kv) => kv.key.slice(keys.prefix.length).split('/'));
    assert.deepEqual(
      found.map(([idx, id]) => [id, idx?.length, idxPriority(idx ?? '')]),
      [
        ['high', 19, 0],
        ['low', 24, 7],
      ],
    );
    const records = await store.kv.range({ key: keys.records, end: prefixEnd(keys.records) });
    assert.ok(!records.kvs.some((kv) => kv.key.endsWith('/high') && kv.value.toString().includes('priority')));
    const low = await h.client.show(q, 'low');
    assert.ok(low !== null);
    assert.equal(low.priority, 7);
    assert.equal(low.group, 'tenant-1');
    const high = await h.client.show(q, 'high');
    assert.ok(high !== null);
    assert.equal(high.priority, 0);
    assert.equal(high.group, null);
  });

  storeTest(
    fixture,
    'priority: a backlog read window by window is still handed out by priority',
    async (h) => {
      const q = h.queue('prio-backlog');
      // More than one window (1000 keys) and more than the dispatcher's lookahead, priorities interleaved.
      const items = Array.from({ length: 2400 }, (_, i) => ({
        payload: i,
        id: `m${i}`,
        priority: [2, 0, 1][i % 3] ?? 0,
      }));
      for (let i = 0; i < items.length; i += 400) await h.client.enqueueBatch(q, items.slice(i, i + 400));
      const log = new JobLog();
      h.worker(q, (job) => log.record(job), { concurrency: 8 });
      await log.count(items.length, { timeoutMs: 60_000 });
      const priorities = log.seen.map((s) => Number(s.id.slice(1)) % 3).map((r) => [2, 0, 1][r] ?? 0);
      // Deliveries of one round may finish out of order: compare each with the message handled 16 later.
      const inversions = priorities.filter((p, i) => (priorities[i + 16] ?? Infinity) < p).length;
      assert.equal(inversions, 0, `priorities in handling order: ${priorities.join('')}`);
    },
    { timeoutMs: 90_000 },
  );
});
