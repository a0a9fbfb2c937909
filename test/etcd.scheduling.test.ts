/**
 * Scheduling on etcd (issue 13), in the store's own layout: priorities in the ordered queue's idx,
 * the debounce index, group concurrency and the rate limit decided by the dispatcher and kept in etcd,
 * and schedules compared and set with the enqueue in one Txn.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe } from 'node:test';
import { openEtcdStore, type EtcdStore } from '../src/stores/etcd/store.js';
import { prefixEnd } from '../src/stores/etcd/kv.js';
import { idxPriority } from '../src/stores/etcd/keys.js';
import { storeTest, type Harness } from './support/harness.js';
import { JobLog } from './support/jobs.js';
import { gate, waitFor } from './support/wait.js';
import { etcdTestUrl } from './fixtures/etcd-support.js';
import type { StoreFixture } from './support/fixture.js';
import { plainMessage } from '../src/stores/contract/new-message.js';

const base = etcdTestUrl();
const fixture: StoreFixture = {
  name: 'etcd',
  url: () => Promise.resolve(`${base}/t-${randomBytes(6).toString('hex')}`),
};

/**
 * A worker on a client of its own that has started `count` messages of `queue`, with a store to read etcd;
 * `replace` stops that process's client (its dispatcher with it) and starts a worker on another.
 */
async function workingProcess(
  h: Harness,
  queue: string,
  count: number,
): Promise<{ log: JobLog; store: EtcdStore; replace: () => Promise<void> }> {
  const first = await h.connect();
  const log = new JobLog();
  const worker = h.worker(queue, (job) => log.record(job), { concurrency: 4 }, first);
  await log.count(count);
  const store = await openEtcdStore(h.url, () => undefined);
  h.cleanup(() => store.close());
  const replace = async (): Promise<void> => {
    await worker.stop();
    await first.close();
    h.worker(queue, (job) => log.record(job), { concurrency: 4 }, await h.connect());
  };
  return { log, store, replace };
}

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

  storeTest(fixture, 'debounce: a burst becomes one run with the last payload, after it goes quiet', async (h) => {
    const q = h.queue('debounce');
    const first = await h.client.enqueue(q, 1, { id: 'd1', debounce: { id: 'user-7', ms: 300 } });
    assert.deepEqual(first, { ok: true, id: 'd1', action: 'added' });
    const results = [];
    for (let n = 2; n <= 4; n++) results.push(await h.client.enqueue(q, n, { debounce: { id: 'user-7', ms: 300 } }));
    assert.deepEqual(
      results.map((r) => (r.ok ? [r.id, r.action] : null)),
      [
        ['d1', 'debounced'],
        ['d1', 'debounced'],
        ['d1', 'debounced'],
      ],
    );
    assert.equal((await h.client.status(q, 'd1'))?.state, 'queued-with-backoff');
    const started = Date.now();
    const log = new JobLog();
    h.worker(q, (job) => log.record(job));
    const seen = await log.handled('d1');
    assert.equal(seen.payload, 4);
    assert.ok(seen.at - started >= 200, 'ran after the quiet time of the last enqueue');
    // Once running (or done) it is no longer waiting: the next enqueue adds a new message.
    const after = await h.client.enqueue(q, 5, { id: 'd2', debounce: { id: 'user-7', ms: 0 } });
    assert.deepEqual(after, { ok: true, id: 'd2', action: 'added' });
    await log.handled('d2');
    assert.equal(log.seen.length, 2);
  });

  storeTest(fixture, 'debounce: the index entry goes with its message (remove, clear), nothing leaks', async (h) => {
    const q = h.queue('debounce-index');
    const store = await openEtcdStore(h.url, () => undefined);
    h.cleanup(() => store.close());
    const keys = store.keys(q);
    const entries = async (): Promise<string[]> =>
      (await store.kv.range({ key: keys.debounceIndex, end: prefixEnd(keys.debounceIndex) })).kvs.map(
        (kv) => `${kv.key.slice(keys.debounceIndex.length)}=${kv.value.toString()}`,
      );
    await h.client.enqueue(q, 'a', { id: 'a', debounce: { id: 'k1', ms: 60_000 } });
    await h.client.enqueue(q, 'b', { id: 'b', debounce: { id: 'k2', ms: 60_000 } });
    await h.client.enqueue(q, 'c', { debounce: { id: 'k1', ms: 60_000 } });
    assert.deepEqual(await entries(), ['k1=a', 'k2=b']);
    await h.client.remove(q, 'a');
    assert.deepEqual(await entries(), ['k2=b']);
    // The id of a removed message is free, and the debounce id adds again.
    assert.deepEqual(await h.client.enqueue(q, 'x', { id: 'a2', debounce: { id: 'k1', ms: 60_000 } }), {
      ok: true,
      id: 'a2',
      action: 'added',
    });
    await h.client.clear(q);
    assert.deepEqual(await entries(), []);
  });

  storeTest(fixture, 'debounce: concurrent enqueues of one debounce id leave one waiting message', async (h) => {
    const q = h.queue('debounce-race');
    const others = await Promise.all([h.connect(), h.connect(), h.connect()]);
    const results = await Promise.all(
      [h.client, ...others].flatMap((c, n) =>
        [0, 1, 2].map((k) => c.enqueue(q, `${n}-${k}`, { debounce: { id: 'race', ms: 60_000 } })),
      ),
    );
    const ids = new Set(results.map((r) => r.id));
    assert.equal(ids.size, 1, `one message: ${[...ids].join(', ')}`);
    assert.equal(results.filter((r) => r.ok && r.action === 'added').length, 1);
    assert.equal((await h.client.list(q)).messages.length, 1);
  });

  storeTest(fixture, 'schedules: a firing larger than one Txn enqueues every message and sets nextAt', async (h) => {
    const q = h.queue('fire-many');
    const store = await openEtcdStore(h.url, () => undefined);
    h.cleanup(() => store.close());
    const schedule = { name: 'nightly', body: '{"x":1}', nextAt: 1000 };
    assert.equal(await store.putSchedule(q, schedule), true);
    assert.equal(await store.putSchedule(q, schedule), false);
    const messages = Array.from({ length: 150 }, (_, i) =>
      plainMessage(`slot-${i}`, Buffer.from(String(i)), { priority: i % 2 }),
    );
    const results = await store.fireSchedule(q, schedule, 2000, messages);
    assert.equal(results?.filter((r) => r.ok && r.action === 'added').length, 150);
    assert.deepEqual(await store.schedules(q), [{ ...schedule, nextAt: 2000 }]);
    // The old expectation no longer holds: nothing is written.
    assert.equal(await store.fireSchedule(q, schedule, 3000, messages.slice(0, 1)), null);
    assert.equal((await h.client.list(q, { limit: 1000 })).messages.length, 150);
    assert.equal(await store.removeSchedule(q, 'nightly'), true);
    assert.equal(await store.removeSchedule(q, 'nightly'), false);
  });

  storeTest(fixture, 'rate limit: the tat is kept in etcd, so a new dispatcher goes on from it', async (h) => {
    const q = h.queue('rate-failover');
    await h.client.configure(q, { rateLimit: { max: 2, perMs: 60_000 } });
    await h.client.enqueueBatch(
      q,
      Array.from({ length: 5 }, (_, n) => ({ payload: n, id: `r-${n}` })),
    );
    const { log, store, replace } = await workingProcess(h, q, 2);
    const stored = await store.kv.range({ key: store.keys(q).rate });
    const tat = Number(stored.kvs[0]?.value.toString());
    assert.ok(tat > Date.now(), `the stored tat ${tat} is ahead: the window's two slots are spent`);
    // The first process goes (its dispatcher with it); another takes over and still grants nothing more.
    await replace();
    await new Promise((resolve) => setTimeout(resolve, 1500));
    assert.equal(log.seen.length, 2, log.ids().join(','));
    assert.equal((await h.client.queueStatus(q)).counts.queued, 3);
    // clear resets it.
    await h.client.clear(q);
    assert.equal((await store.kv.range({ key: store.keys(q).rate })).kvs.length, 0);
  });

  storeTest(fixture, "group rate limit: each group's next start is kept in etcd for a new dispatcher", async (h) => {
    const q = h.queue('group-rate-failover');
    await h.client.configure(q, { groupRateLimit: { max: 1, perMs: 60_000 } });
    await h.client.enqueueBatch(q, [
      ...Array.from({ length: 3 }, (_, n) => ({ payload: n, id: `g-${n}`, group: 'g' })),
      { payload: 0, id: 'h-0', group: 'h' },
    ]);
    const { log, store, replace } = await workingProcess(h, q, 2);
    const prefix = store.keys(q).groupRates;
    const stored = await store.kv.range({ key: prefix, end: prefixEnd(prefix) });
    assert.deepEqual(
      stored.kvs.map((kv) => kv.key.slice(prefix.length)),
      ['g', 'h'],
    );
    for (const kv of stored.kvs) assert.ok(Number(kv.value.toString()) > Date.now() + 50_000, kv.value.toString());
    // The first process goes (its dispatcher with it); another takes over and starts nothing more of g.
    await replace();
    await h.client.enqueue(q, 1, { id: 'u-1' });
    await log.handled('u-1');
    await new Promise((resolve) => setTimeout(resolve, 1000));
    assert.deepEqual(log.ids().sort(), ['g-0', 'h-0', 'u-1']);
    assert.equal((await h.client.status(q, 'g-1'))?.state, 'queued');
    // clear resets it.
    await h.client.clear(q);
    assert.equal((await store.kv.range({ key: prefix, end: prefixEnd(prefix) })).kvs.length, 0);
  });

  storeTest(fixture, "group rate limit: groups' keys go once their next start time has passed", async (h) => {
    const q = h.queue('group-rate-sweep');
    await h.client.configure(q, { groupRateLimit: { max: 2, perMs: 400 } });
    await h.client.enqueueBatch(q, [
      ...Array.from({ length: 8 }, (_, n) => ({ payload: n, id: `g${n % 4}-${n}`, group: `g${n % 4}` })),
      // More groups than one sweep Txn deletes.
      ...Array.from({ length: 150 }, (_, n) => ({ payload: n, id: `once-${n}`, group: `once-${n}` })),
    ]);
    const log = new JobLog();
    h.worker(q, (job) => log.record(job), { concurrency: 16 });
    await log.count(158, { timeoutMs: 15_000 });
    const starts = (group: string): number[] => log.seen.filter((s) => s.id.startsWith(`${group}-`)).map((s) => s.at);
    for (const n of [0, 1, 2, 3]) {
      const [a = 0, b = 0] = starts(`g${n}`);
      assert.ok(Math.abs(b - a) >= 150, `g${n} started at ${a} and ${b}`);
    }
    const store = await openEtcdStore(h.url, () => undefined);
    h.cleanup(() => store.close());
    const prefix = store.keys(q).groupRates;
    await waitFor(
      async () => (await store.kv.range({ key: prefix, end: prefixEnd(prefix), countOnly: true })).count === 0,
      { what: "the groups' keys to go", timeoutMs: 10_000 },
    );
  });

  storeTest(
    fixture,
    "group rate limit: a killed worker's message goes again only at its group's next slot",
    async (h) => {
      const q = h.queue('group-rate-lost');
      const spacingMs = 3000;
      await h.client.configure(q, { groupRateLimit: { max: 1, perMs: spacingMs } });
      await h.client.enqueue(q, 'x', { id: 'lost', group: 'g' });
      // The dispatcher lives here, so it sees the lock end when the child is killed.
      const store = await openEtcdStore(h.url, () => undefined);
      h.cleanup(() => store.close());
      h.cleanup(store.dispatch(q));
      const child = h.spawn('worker-process.ts', [h.url, q, 'hang', '1000']);
      await child.line(/^claimed lost 1$/);
      const firstStart = Date.now();
      const log = new JobLog();
      h.worker(q, (job) => log.record(job), { concurrency: 2, eoqBackoffMs: 50 });
      await child.kill('SIGKILL');
      // Its lock ends after a second; the delivery to this worker is a new start of g, spaced as any other.
      const again = await log.handled('lost', 2, { timeoutMs: 15_000 });
      assert.ok(again.at - firstStart >= spacingMs - 200, `started again ${again.at - firstStart} ms after the first`);
    },
  );

  storeTest(fixture, 'groups: a new dispatcher counts what is held from etcd after a failover', async (h) => {
    const q = h.queue('group-failover');
    await h.client.configure(q, { groupConcurrency: 1 });
    // A process that only dispatches, so it can go while the holder keeps its message.
    const first = await openEtcdStore(h.url, () => undefined);
    const resign = first.dispatch(q);
    await h.client.enqueueBatch(q, [
      { payload: 1, id: 'g-1', group: 'g' },
      { payload: 2, id: 'g-2', group: 'g' },
    ]);
    const release = gate();
    const log = new JobLog();
    const holder = await h.connect();
    h.worker(
      q,
      async (job) => {
        log.record(job);
        if (job.id === 'g-1') await release.opened;
      },
      { concurrency: 1 },
      holder,
    );
    await log.handled('g-1');
    const other = await h.connect();
    h.worker(q, (job) => log.record(job), { concurrency: 4 }, other);
    // The dispatcher goes; one of the workers' processes takes over and reads who holds what.
    resign();
    await first.close();
    await h.client.enqueue(q, 3, { id: 'u-1' });
    await log.handled('u-1');
    await new Promise((resolve) => setTimeout(resolve, 1000));
    assert.equal((await h.client.status(q, 'g-2'))?.state, 'queued', 'g is full while g-1 is held');
    release.open();
    await log.handled('g-2');
    assert.deepEqual(log.ids(), ['g-1', 'u-1', 'g-2']);
  });
});
