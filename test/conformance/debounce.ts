/** Debounce: a burst of enqueues with one debounce id becomes one message, run after the burst goes quiet. */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { claimIds } from '../support/claims.js';
import { storeTest } from '../support/harness.js';
import { JobLog, stateOf } from '../support/jobs.js';
import { quietPeriod } from '../support/wait.js';
import type { StoreFixture } from '../support/fixture.js';

const LONG_MS = 60_000;

/** A value as a caller without types might pass it. */
const loose = (value: unknown): never => value as never;

export function debounce(fixture: StoreFixture): void {
  void describe('debounce', () => {
    storeTest(fixture, 'a burst with one debounce id becomes one message with the last payload', async (h) => {
      const q = h.queue('debounce');
      const results = [];
      for (let n = 1; n <= 5; n += 1) {
        results.push(
          await h.client.enqueue(q, { n }, { id: `burst-${n}`, debounce: { id: 'doc-7', ms: 100 }, metadata: { n } }),
        );
      }
      assert.deepEqual(results[0], { ok: true, id: 'burst-1', action: 'added' });
      for (const result of results.slice(1)) assert.deepEqual(result, { ok: true, id: 'burst-1', action: 'debounced' });
      assert.equal((await h.client.queueStatus(q)).total, 1);
      for (const n of [2, 3, 4, 5]) assert.equal(await h.client.status(q, `burst-${n}`), null);
      const shown = await h.client.show(q, 'burst-1');
      assert.deepEqual(shown?.payload, { n: 5 });
      assert.deepEqual(shown.metadata, { n: 5 });

      const log = new JobLog();
      h.worker(q, (job) => log.record(job));
      const seen = await log.handled('burst-1');
      assert.deepEqual(seen.payload, { n: 5 });
      await quietPeriod();
      assert.equal(log.seen.length, 1);
    });

    storeTest(fixture, 'each debounced enqueue moves the ready time; the message keeps its options', async (h) => {
      const q = h.queue('debounce-keeps');
      const first = await h.client.enqueue(q, 'a', {
        id: 'kept',
        debounce: { id: 'k', ms: 0 },
        priority: 3,
        group: 'g',
      });
      assert.equal(first.ok && first.action, 'added');
      assert.equal(await stateOf(h.client, q, 'kept'), 'queued');
      const before = Date.now();
      const second = await h.client.enqueue(q, 'b', { debounce: { id: 'k', ms: LONG_MS }, priority: 9 });
      assert.deepEqual(second, { ok: true, id: 'kept', action: 'debounced' });
      const status = await h.client.status(q, 'kept');
      assert.equal(status?.state, 'queued-with-backoff');
      assert.ok(status.until !== null && status.until >= before + LONG_MS - 1000, `until ${status.until}`);
      const shown = await h.client.show(q, 'kept');
      assert.equal(shown?.payload, 'b');
      assert.equal(shown.priority, 3);
      assert.equal(shown.group, 'g');
      // Another debounce id is another message.
      const other = await h.client.enqueue(q, 'c', { id: 'other', debounce: { id: 'k2', ms: 0 } });
      assert.deepEqual(other, { ok: true, id: 'other', action: 'added' });
      assert.equal((await h.client.queueStatus(q)).total, 2);
    });

    storeTest(fixture, 'once the waiting message is locked, a new enqueue adds a new message', async (h) => {
      const q = h.queue('debounce-locked');
      await h.client.enqueue(q, 'one', { id: 'one', debounce: { id: 'd', ms: 0 } });
      assert.deepEqual((await claimIds(h, q, 'holder', 1)).ids, ['one']);
      const next = await h.client.enqueue(q, 'two', { id: 'two', debounce: { id: 'd', ms: 0 } });
      assert.deepEqual(next, { ok: true, id: 'two', action: 'added' });
      // The new message is now the waiting one.
      const third = await h.client.enqueue(q, 'three', { id: 'three', debounce: { id: 'd', ms: 0 } });
      assert.deepEqual(third, { ok: true, id: 'two', action: 'debounced' });
      assert.equal((await h.client.show(q, 'two'))?.payload, 'three');
      assert.equal((await h.client.show(q, 'one'))?.payload, 'one');
      assert.equal((await h.client.queueStatus(q)).total, 2);
    });

    storeTest(fixture, 'a removed waiting message no longer takes debounced enqueues', async (h) => {
      const q = h.queue('debounce-removed');
      await h.client.enqueue(q, 'one', { id: 'one', debounce: { id: 'd', ms: LONG_MS } });
      assert.equal((await h.client.remove(q, 'one')).ok, true);
      const next = await h.client.enqueue(q, 'two', { id: 'two', debounce: { id: 'd', ms: LONG_MS } });
      assert.deepEqual(next, { ok: true, id: 'two', action: 'added' });
      await h.client.clear(q);
      const after = await h.client.enqueue(q, 'three', { id: 'three', debounce: { id: 'd', ms: LONG_MS } });
      assert.deepEqual(after, { ok: true, id: 'three', action: 'added' });
      assert.equal((await h.client.queueStatus(q)).total, 1);
    });

    storeTest(fixture, 'debounced enqueues in one batch become one message', async (h) => {
      const q = h.queue('debounce-batch');
      const results = await h.client.enqueueBatch(
        q,
        [1, 2, 3].map((n) => ({ payload: n, id: `b-${n}`, debounce: { id: 'd', ms: 0 } })),
      );
      assert.deepEqual(results, [
        { ok: true, id: 'b-1', action: 'added' },
        { ok: true, id: 'b-1', action: 'debounced' },
        { ok: true, id: 'b-1', action: 'debounced' },
      ]);
      assert.equal((await h.client.show(q, 'b-1'))?.payload, 3);
      assert.equal((await h.client.queueStatus(q)).total, 1);
    });

    storeTest(fixture, 'a bad debounce is a TypeError naming what is allowed; nothing written', async (h) => {
      const q = h.queue('debounce-bad');
      const cases: [unknown, RegExp][] = [
        [{ id: 'd', ms: 10, every: 5 }, /unknown option 'every'.*id, ms/],
        [{ id: 'd' }, /ms/],
        [{ ms: 10 }, /id/],
        [{ id: 'has space', ms: 10 }, /debounce id/],
        [{ id: 'd', ms: -1 }, /debounce\.ms/],
        [{ id: 'd', ms: 1.5 }, /debounce\.ms/],
        ['d', /debounce/],
      ];
      for (const [bad, message] of cases) {
        await assert.rejects(
          h.client.enqueue(q, 'x', { id: 'bad', debounce: loose(bad) }),
          (error: unknown) => error instanceof TypeError && message.test(error.message),
          JSON.stringify(bad),
        );
      }
      assert.equal(await h.client.status(q, 'bad'), null);
      assert.equal((await h.client.queueStatus(q)).total, 0);
    });
  });
}
