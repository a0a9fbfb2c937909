/** Adding messages: new ids, duplicates, batches, and what payloads come back as. */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { storeTest } from '../support/harness.js';
import { JobLog } from '../support/jobs.js';
import { handledUntilDry } from '../support/until-dry.js';
import type { StoreFixture } from '../support/fixture.js';

export function enqueue(fixture: StoreFixture): void {
  void describe('enqueue', () => {
    storeTest(
      fixture,
      'a new id is added as queued; the same id again is refused with its current state',
      async (h) => {
        const q = h.queue('dup');
        assert.deepEqual(await h.client.enqueue(q, { n: 1 }, { id: 'm1' }), { ok: true, id: 'm1', action: 'added' });
        const status = await h.client.status(q, 'm1');
        assert.ok(status);
        assert.equal(status.state, 'queued');
        assert.equal(status.attempt, 0);
        assert.equal(status.outcome, null);
        assert.equal(status.lastError, null);
        assert.equal(status.consumer, null);
        assert.ok(status.enqueuedAt > Date.now() - 60_000 && status.enqueuedAt <= Date.now() + 1000);

        assert.deepEqual(await h.client.enqueue(q, { n: 2 }, { id: 'm1' }), { ok: false, id: 'm1', state: 'queued' });
        assert.equal((await h.client.queueStatus(q)).total, 1);

        // The refused duplicate changed nothing: the worker gets the first payload.
        const log = new JobLog();
        h.worker(q, (job) => log.record(job));
        assert.deepEqual((await log.handled('m1')).payload, { n: 1 });
      },
    );

    storeTest(fixture, 'without an id each message gets a fresh one', async (h) => {
      const q = h.queue('ids');
      const a = await h.client.enqueue(q, 'same');
      const b = await h.client.enqueue(q, 'same');
      assert.ok(a.ok && b.ok);
      assert.equal(a.action, 'added');
      assert.equal(b.action, 'added');
      assert.notEqual(a.id, b.id);
      assert.equal((await h.client.status(q, a.id))?.state, 'queued');
      assert.equal((await h.client.status(q, b.id))?.state, 'queued');
      assert.equal((await h.client.queueStatus(q)).counts.queued, 2);
    });

    storeTest(fixture, 'enqueueBatch returns results in order, refusals mixed with accepts', async (h) => {
      const q = h.queue('batch');
      await h.client.enqueue(q, 'earlier', { id: 'b' });
      const results = await h.client.enqueueBatch(q, [
        { payload: 1, id: 'a' },
        { payload: 2, id: 'b' },
        { payload: 3, id: 'c' },
        { payload: 4, id: 'a' },
        { payload: 5 },
      ]);
      assert.equal(results.length, 5);
      assert.deepEqual(results.slice(0, 4), [
        { ok: true, id: 'a', action: 'added' },
        { ok: false, id: 'b', state: 'queued' },
        { ok: true, id: 'c', action: 'added' },
        { ok: false, id: 'a', state: 'queued' },
      ]);
      const last = results[4];
      assert.ok(last?.ok === true && last.action === 'added' && !['a', 'b', 'c'].includes(last.id));
      assert.equal((await h.client.queueStatus(q)).total, 4);
      assert.deepEqual(await h.client.enqueueBatch(q, []), []);
      // The refused duplicates changed nothing: 'a' keeps the batch's first payload, 'b' the earlier one.
      const log = await handledUntilDry(h, q, 4);
      const payloads = new Map(log.seen.map((s) => [s.id, s.job.payload]));
      assert.equal(payloads.get('a'), 1);
      assert.equal(payloads.get('b'), 'earlier');
    });

    storeTest(fixture, 'a batch whose messages differ in every option keeps each one its own', async (h) => {
      const q = h.queue('batch-mixed');
      const results = await h.client.enqueueBatch(q, [
        { payload: Buffer.from([7, 0, 255]), id: 'bytes', priority: 2, metadata: { k: 'bytes' } },
        { payload: { n: 1 }, id: 'later', initialBackoffMs: 600_000, metadata: { k: 'later' } },
        { payload: 'grouped', id: 'grouped', group: 'g', priority: 1 },
        { payload: [1, 2], id: 'first', metadata: { k: 'first' }, attempts: 7 },
      ]);
      assert.ok(results.every((r) => r.ok && r.action === 'added'));
      // One at a time: priority order; the delayed one stays waiting.
      const log = await handledUntilDry(h, q, 3);
      assert.deepEqual(log.ids(), ['first', 'grouped', 'bytes']);
      const byId = new Map(log.seen.map((s) => [s.id, s.job]));
      assert.deepEqual(byId.get('bytes')?.payload, Buffer.from([7, 0, 255]));
      assert.deepEqual(byId.get('bytes')?.metadata, { k: 'bytes' });
      assert.deepEqual(byId.get('first')?.payload, [1, 2]);
      assert.deepEqual(byId.get('first')?.metadata, { k: 'first' });
      assert.deepEqual(byId.get('grouped')?.metadata, {});
      assert.equal((await h.client.status(q, 'later'))?.state, 'queued-with-backoff');
    });

    storeTest(fixture, 'payloads and metadata round-trip: JSON values stay JSON, Buffers stay Buffers', async (h) => {
      const q = h.queue('payloads');
      const payloads: Record<string, unknown> = {
        object: { nested: { list: [1, 'two', null, true], text: 'héllo ✓ 🚀' } },
        array: [1, [2, [3]]],
        string: 'plain string',
        empty: '',
        integer: 42,
        float: -3.25,
        boolean: false,
        null: null,
        buffer: Buffer.from([0, 1, 2, 127, 128, 255]),
        emptyBuffer: Buffer.alloc(0),
      };
      for (const [id, payload] of Object.entries(payloads)) {
        await h.client.enqueue(q, payload, { id, metadata: { kind: id, n: 1 } });
      }
      await h.client.enqueue(q, new Uint8Array([9, 8, 7]), { id: 'uint8' });

      const log = new JobLog();
      h.worker(q, (job) => log.record(job));
      await log.count(Object.keys(payloads).length + 1);
      for (const [id, payload] of Object.entries(payloads)) {
        const seen = (await log.handled(id)).job;
        if (Buffer.isBuffer(payload)) {
          assert.ok(Buffer.isBuffer(seen.payload), `${id} came back as ${typeof seen.payload}`);
          assert.deepEqual([...seen.payload], [...payload]);
        } else {
          assert.deepEqual(seen.payload, payload, id);
        }
        assert.deepEqual(seen.metadata, { kind: id, n: 1 });
        assert.deepEqual(seen.filters, {});
        assert.equal(seen.queue, q);
      }
      const bytes = (await log.handled('uint8')).payload;
      assert.ok(Buffer.isBuffer(bytes), 'a Uint8Array comes back as a Buffer');
      assert.deepEqual([...bytes], [9, 8, 7]);
      assert.deepEqual((await log.handled('uint8')).job.metadata, {});
    });

    storeTest(fixture, 'an enqueued message is visible at once to another client', async (h) => {
      const q = h.queue('visible');
      const other = await h.connect();
      await h.client.enqueue(q, 'x', { id: 'seen-elsewhere' });
      assert.equal((await other.status(q, 'seen-elsewhere'))?.state, 'queued');
      assert.deepEqual(await other.enqueue(q, 'y', { id: 'seen-elsewhere' }), {
        ok: false,
        id: 'seen-elsewhere',
        state: 'queued',
      });
    });
  });
}
