/**
 * Queue events on etcd (src/stores/etcd/queue-events.ts): each event key is put in the very Txn of the transition it
 * records, whoever writes it (producers, the dispatcher's deliveries, consumers' finishes, actions); cursors
 * are mod revisions, so a writer that commits an older time late is still read; trimming records the
 * highest revision it deleted; the registry lists queues; plain producers' messages get events too.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { openEtcdStore, type EtcdStore } from '../src/stores/etcd/store.js';
import { prefixEnd } from '../src/stores/etcd/kv.js';
import { logRevisions, type RevisionLog } from '../src/stores/etcd/revision-log.js';
import { eventOps } from '../src/stores/etcd/event-ops.js';
import { queueRegistry } from '../src/stores/etcd/keys.js';
import { waitFor } from './support/wait.js';
import { closedAfterAll, isolatedUrl } from './fixtures/etcd-support.js';

const TIMEOUT_MS = 90_000;
const opened = closedAfterAll();
const { client, store } = opened;

/** Every change under the queue's prefix from `from` on, by revision, until the file's end. */
function recordChanges(s: EtcdStore, queue: string, from: number): RevisionLog {
  const log = logRevisions(s.kv, s.keys(queue).prefix, from, (error) =>
    assert.fail(`the test's watch broke: ${error.message}`),
  );
  opened.add(() => log.cancel());
  return log;
}

void describe('etcd queue events', () => {
  void test(
    'each event is in the Txn of its transition, and each transition has its event, under concurrency',
    { timeout: TIMEOUT_MS },
    async () => {
      const url = isolatedUrl();
      const s = await store(url);
      const q = 'mix';
      const keys = s.keys(q);
      const producer = await client(url);
      await producer.configure(q, { events: true, maxDeliveries: 0 });
      const start = (await s.kv.range({ key: keys.config })).revision + 1;
      const changes = recordChanges(s, q, start);

      const outcomes = { success: 0, retry: 0, error: 0 };
      const failedOnce = new Set<string>();
      for (const n of [0, 1]) {
        const worker = await client(url);
        worker.worker(
          q,
          (job) => {
            const pick = (Number(job.id.slice(1)) + job.attempt + n) % 3;
            if (pick === 0 && job.attempt === 1) {
              outcomes.retry += 1;
              return { status: 'retry', backoffMs: 10, error: `again ${job.id}` };
            }
            if (pick === 1 && Number(job.id.slice(1)) % 5 === 0 && !failedOnce.has(job.id)) {
              failedOnce.add(job.id);
              outcomes.error += 1;
              return { status: 'error', error: `failed ${job.id}` };
            }
            outcomes.success += 1;
            return undefined;
          },
          { concurrency: 6 },
        );
      }
      const ids = Array.from({ length: 120 }, (_, i) => `m${i}`);
      await Promise.all(
        [0, 1, 2].map(async (lane) => {
          for (let i = lane * 40; i < lane * 40 + 40; i += 10) {
            await producer.enqueueBatch(
              q,
              ids.slice(i, i + 10).map((id) => ({ id, payload: id })),
            );
          }
        }),
      );
      // Plain producers' puts, moved (and delivered) by the dispatcher.
      for (const id of ['p1', 'p2', 'p3']) {
        await s.kv.txn({ compare: [], success: [{ type: 'put', key: keys.producer(id), value: Buffer.from(id) }] });
      }
      let counts = {};
      await waitFor(
        async () => {
          const status = await producer.queueStatus(q);
          counts = status.counts;
          return status.counts['done-awaiting-gc'] + status.counts.failed === ids.length + 3;
        },
        { what: () => `every message finished (${JSON.stringify(counts)})`, timeoutMs: 60_000 },
      );
      const failed = (await producer.list(q, { states: ['failed'], limit: 1000 })).messages.map((m) => m.id);
      assert.ok(failed.length > 0, 'some failed');
      await producer.retryFailed(q);
      await producer.remove(q, 'm1');
      await waitFor(async () => (await producer.queueStatus(q)).counts['done-awaiting-gc'] === ids.length + 3 - 1, {
        what: 'the retried ones finished',
        timeoutMs: 60_000,
      });
      // A last key under the queue's prefix: once the watch has it, it has everything before.
      const marker = await s.kv.txn({
        compare: [],
        success: [{ type: 'put', key: `${keys.prefix}kvmq/test-marker`, value: Buffer.alloc(0) }],
      });
      await waitFor(() => changes.last() >= marker.revision, { what: 'the watch caught up' });

      const counted = { enqueued: 0, started: 0, completed: 0, retrying: 0, failed: 0, removed: 0 };
      for (const [revision, events] of changes.byRevision) {
        const deliveredIds = new Set<string>();
        const startedIds: string[] = [];
        for (const e of events) {
          const parsed = keys.parse(e.kv.key);
          if (parsed.kind === 'delivery' && e.type === 'put') deliveredIds.add(parsed.id);
        }
        const written = events.filter((e) => e.kv.key.startsWith(keys.events) && e.type === 'put');
        assert.ok(
          written.length <= 1,
          `revision ${revision}: one event key per Txn, not ${written.length}: ${written.map((e) => e.kv.value.toString()).join(' ')}`,
        );
        const notes = written.flatMap(
          (e) => JSON.parse(e.kv.value.toString('utf8')) as { t: keyof typeof counted; id: string; a: number }[],
        );
        for (const event of notes) {
          counted[event.t] += 1;
          const touched = (kind: string, type: 'put' | 'delete'): boolean =>
            events.some((other) => {
              const p = keys.parse(other.kv.key);
              return other.type === type && p.kind === kind && 'id' in p && p.id === event.id;
            });
          const what = `${event.t} of ${event.id} at revision ${revision}`;
          switch (event.t) {
            case 'enqueued':
              assert.ok(touched('ordered', 'put'), `${what}: its ordered key is put in the same Txn`);
              break;
            case 'started':
              startedIds.push(event.id);
              assert.ok(deliveredIds.has(event.id), `${what}: its delivery is put in the same Txn`);
              break;
            case 'completed':
            case 'retrying':
            case 'failed':
              assert.ok(touched('delivery', 'delete'), `${what}: its delivery is deleted in the same Txn`);
              assert.ok(touched('record', 'put'), `${what}: its record is written in the same Txn`);
              break;
            case 'removed':
              assert.ok(touched('record', 'delete'), `${what}: its record is deleted in the same Txn`);
              break;
          }
        }
        assert.deepEqual(startedIds.sort(), [...deliveredIds].sort(), `revision ${revision}: a started per delivery`);
      }
      assert.equal(counted.completed, outcomes.success, 'a completed per success stored');
      assert.equal(counted.retrying, outcomes.retry, 'a retrying per retry stored');
      assert.equal(counted.failed, outcomes.error, 'a failed per error stored');
      assert.equal(counted.enqueued, ids.length + 3 + failed.length, 'an enqueued per message, and per redrive');
      assert.equal(counted.removed, 1);
      assert.equal(counted.started, outcomes.success + outcomes.retry + outcomes.error);

      // What readEvents returns is exactly what was written, in commit order.
      const read = [];
      let cursor: string | undefined;
      for (;;) {
        const page = await producer.readEvents(q, cursor === undefined ? { limit: 97 } : { after: cursor, limit: 97 });
        read.push(...page.events);
        if (page.events.length === 0) break;
        cursor = page.cursor;
      }
      const revisions = read.map((e) => Number(e.cursor.split('.')[0]));
      assert.deepEqual(
        revisions,
        [...revisions].sort((a, b) => a - b),
        'oldest first, by revision',
      );
      assert.equal(
        read.length,
        Object.values(counted).reduce((a, b) => a + b, 0),
      );
    },
  );

  void test('a writer that commits an older time after a reader passed is still read', async () => {
    const url = isolatedUrl();
    const s = await store(url);
    const q = 'slow';
    const keys = s.keys(q);
    await s.configure(q, { events: true });
    const c = await client(url);
    await c.enqueue(q, 'x', { id: 'first' });
    const passed = await c.readEvents(q);
    assert.deepEqual(
      passed.events.map((e) => e.id),
      ['first'],
    );
    // A Txn whose writer took its time a minute ago, committed only now.
    const late = Date.now() - 60_000;
    await s.kv.txn({
      compare: [],
      success: eventOps(keys, true, late, { type: 'enqueued', id: 'late', attempt: 0 }),
    });
    const next = await c.readEvents(q, { after: passed.cursor });
    assert.deepEqual(
      next.events.map((e) => [e.id, e.at]),
      [['late', late]],
    );
  });

  void test('trimming deletes whole keys only past the bounds and keeps the highest revision it deleted', async () => {
    const url = isolatedUrl();
    const s = await store(url);
    const q = 'trim';
    const keys = s.keys(q);
    await s.configure(q, { events: true, eventsMaxCount: 150 });
    const c = await client(url);
    // Eight Txns of 50 enqueues: eight event keys of 50 events each.
    for (let i = 0; i < 400; i += 50) {
      await c.enqueueBatch(
        q,
        Array.from({ length: 50 }, (_, j) => ({ id: `m${i + j}`, payload: 1 })),
      );
    }
    const names = async (): Promise<string[]> =>
      (await s.kv.range({ key: keys.events, end: prefixEnd(keys.events), keysOnly: true })).kvs.map((k) => k.key);
    const before = await s.kv.range({ key: keys.events, end: prefixEnd(keys.events), keysOnly: true });
    assert.equal(before.kvs.length, 8);
    assert.ok(
      before.kvs.every((k) => k.key.endsWith('.50')),
      'each key says it holds 50 events',
    );
    await s.gc(q, true);
    assert.deepEqual(
      await names(),
      before.kvs.slice(5).map((k) => k.key),
      'the newest 150 events stay',
    );
    const trimmedAt = async (): Promise<string | undefined> =>
      (await s.kv.range({ key: keys.eventsTrimmed })).kvs[0]?.value.toString('utf8');
    const highest = Math.max(...before.kvs.slice(0, 5).map((k) => k.modRevision));
    assert.equal(await trimmedAt(), String(highest));
    assert.equal((await c.readEvents(q, { limit: 1000 })).events.length, 150);

    // A bound inside a key keeps the key: no event newer than the bounds goes.
    await s.configure(q, { eventsMaxCount: 120 });
    await s.gc(q, true);
    assert.equal((await names()).length, 3);

    // Age: everything older than 1 ms goes at the next GC; the trimmed revision only grows.
    await s.configure(q, { eventsMaxAgeMs: 1 });
    await new Promise((resolve) => setTimeout(resolve, 5));
    await s.gc(q, true);
    assert.deepEqual(await names(), []);
    const all = Math.max(...before.kvs.map((k) => k.modRevision));
    assert.equal(await trimmedAt(), String(all));

    // clear removes the events and keeps the trimmed revision.
    await c.enqueue(q, 'x', { id: 'after' });
    await s.clear([q]);
    assert.deepEqual(await names(), []);
    assert.equal(await trimmedAt(), String(all));
  });

  void test("a page may end inside a Txn's events and the next one goes on from there", async () => {
    const url = isolatedUrl();
    const s = await store(url);
    const q = 'split';
    await s.configure(q, { events: true });
    const c = await client(url);
    const ids = Array.from({ length: 30 }, (_, i) => `m${String(i).padStart(2, '0')}`);
    await c.enqueueBatch(
      q,
      ids.slice(0, 20).map((id) => ({ id, payload: 1 })),
    );
    await c.enqueueBatch(
      q,
      ids.slice(20).map((id) => ({ id, payload: 1 })),
    );
    const seen: string[] = [];
    const cursors: string[] = [];
    let after: string | undefined;
    for (;;) {
      const page = await c.readEvents(q, after === undefined ? { limit: 7 } : { after, limit: 7 });
      assert.equal(page.missed, false);
      seen.push(...page.events.map((e) => e.id));
      cursors.push(...page.events.map((e) => e.cursor));
      if (page.events.length === 0) break;
      after = page.cursor;
    }
    assert.deepEqual(seen, ids);
    assert.equal(new Set(cursors).size, cursors.length, 'every event has its own cursor');
    assert.equal(cursors.at(-1), await s.eventsHead(q), 'the last event of the newest Txn is the head');
    await assert.rejects(c.readEvents(q, { after: '12.0' }), /cursor/);
  });

  void test('subscribeEvents: listeners share a watch, hear new events, and nothing after unsubscribe or close', async () => {
    const url = isolatedUrl();
    const s = await openEtcdStore(url, () => undefined);
    const q = 'heard';
    await s.configure(q, { events: true });
    const c = await client(url);
    let a = 0;
    let b = 0;
    const stopA = s.subscribeEvents(q, () => (a += 1));
    const stopB = s.subscribeEvents(q, () => (b += 1));
    // Called once the watch is in place; then an event reaches both.
    await waitFor(() => a > 0 && b > 0, { what: 'the first call, once watching' });
    const [a0, b0] = [a, b];
    await c.enqueue(q, 'x', { id: 'one' });
    await waitFor(() => a > a0 && b > b0, { what: 'both listeners to hear the event' });
    stopA();
    const [a1, b1] = [a, b];
    await c.enqueue(q, 'x', { id: 'two' });
    await waitFor(() => b > b1, { what: 'the remaining listener to hear the event' });
    assert.equal(a, a1, 'an unsubscribed listener hears nothing more');
    stopB();
    const late = s.subscribeEvents(q, () => assert.fail('called after close'));
    await s.close();
    await c.enqueue(q, 'x', { id: 'three' });
    // Give a stray call every chance to arrive: the event is read back through another store.
    const other = await store(url);
    await waitFor(async () => (await other.readEvents(q, null, 100)).events.some((e) => e.id === 'three'), {
      what: 'the last event written',
    });
    late();
  });

  void test('the registry lists configured queues, enqueued ones, dead-letter queues and plain-put ones', async () => {
    const url = isolatedUrl();
    const s = await store(url);
    const c = await client(url);
    await c.configure('conf', { deadLetterQueue: 'dead' });
    await c.enqueue('sent', 'x');
    c.worker('conf', () => ({ status: 'error', error: 'no' }));
    await c.enqueue('conf', 'x', { id: 'to-dead' });
    const plain = s.keys('plain');
    await s.kv.txn({ compare: [], success: [{ type: 'put', key: plain.producer('p'), value: Buffer.from('x') }] });
    const release = s.dispatch('plain');
    opened.add(release);
    await waitFor(async () => (await s.queues()).length === 4, { what: 'four queues listed' });
    assert.deepEqual(await s.queues(), ['conf', 'dead', 'plain', 'sent']);
    const registry = await s.kv.range({ key: queueRegistry(s.root), end: prefixEnd(queueRegistry(s.root)) });
    assert.equal(registry.count, 4, 'one key per queue, whatever its messages');
  });
});
