/**
 * client.update: a waiting or delayed message takes a new payload, priority, ready time or filters in one atomic
 * write, and a worker gets the new content in the new order; a held, finished or unknown one is refused, nothing
 * changed; against concurrent claims each message runs either with its old content (the update refused) or its
 * new one, never a mix, and none is lost.
 */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { storeTest } from '../support/harness.js';
import { JobLog, waitForStatus } from '../support/jobs.js';
import { gate, quietPeriod, waitFor, within } from '../support/wait.js';
import { handledOrder } from './priority.js';
import type { StoreFixture } from '../support/fixture.js';
import { FilterError, MessageGoneError, PayloadTooLargeError } from '../../src/model/errors.js';
import { storeOf } from '../../src/client/client-store.js';
import { sleep } from '../../src/model/time.js';
import type { Job } from '../../src/index.js';

/** A value as a caller without types might pass it. */
const loose = (value: unknown): never => value as never;

// Far beyond any wait of these tests: a delayed message stays delayed until updated.
const LATER_MS = 600_000;

export function update(fixture: StoreFixture): void {
  void describe('update', () => {
    storeTest(fixture, 'a queued message runs with its new payload, in its new priority order', async (h) => {
      const q = h.queue('update-queued');
      await h.client.configure(q, { events: true });
      for (const id of ['a', 'b', 'c']) await h.client.enqueue(q, `old-${id}`, { id, priority: 5 });
      const before = await h.client.status(q, 'c');
      assert.deepEqual(await h.client.update(q, 'c', { payload: { v: 'new-c' }, priority: 1 }), {
        ok: true,
        id: 'c',
        state: 'queued',
      });
      assert.deepEqual(await h.client.update(q, 'a', { priority: 9 }), { ok: true, id: 'a', state: 'queued' });
      const after = await h.client.status(q, 'c');
      assert.equal(after?.enqueuedAt, before?.enqueuedAt);
      assert.equal(after?.attempt, 0);
      const log = new JobLog();
      h.worker(q, (job) => log.record(job), { concurrency: 1 });
      await log.count(3);
      assert.deepEqual(log.ids(), ['c', 'b', 'a']);
      assert.deepEqual(
        log.seen.map((s) => [s.id, s.attempt, s.payload]),
        [
          ['c', 1, { v: 'new-c' }],
          ['b', 1, 'old-b'],
          ['a', 1, 'old-a'],
        ],
      );
      await waitForStatus(h.client, q, 'a', 'done-awaiting-gc');
      const types = (await h.client.readEvents(q)).events.filter((e) => e.id === 'c').map((e) => [e.type, e.attempt]);
      assert.deepEqual(types.slice(0, 3), [
        ['enqueued', 0],
        ['updated', 0],
        ['started', 1],
      ]);
    });

    storeTest(fixture, 'a new ready time delays a queued message, and a past one runs a delayed one now', async (h) => {
      const q = h.queue('update-delay');
      await h.client.enqueue(q, 'first', { id: 'd', initialBackoffMs: LATER_MS });
      await h.client.enqueue(q, 'q', { id: 'q' });
      assert.deepEqual(await h.client.update(q, 'q', { delayMs: LATER_MS }), {
        ok: true,
        id: 'q',
        state: 'queued-with-backoff',
      });
      assert.equal((await h.client.status(q, 'q'))?.state, 'queued-with-backoff');
      assert.deepEqual(await h.client.update(q, 'd', { runAt: new Date(Date.now() - 1000), payload: 'second' }), {
        ok: true,
        id: 'd',
        state: 'queued',
      });
      const log = new JobLog();
      h.worker(q, (job) => log.record(job));
      assert.equal((await log.handled('d')).payload, 'second');
      // The other one waits now, until its ready time is brought forward.
      await quietPeriod();
      assert.deepEqual(log.ids(), ['d']);
      assert.equal((await h.client.status(q, 'q'))?.state, 'queued-with-backoff');
      assert.deepEqual(await h.client.update(q, 'q', { delayMs: 0 }), { ok: true, id: 'q', state: 'queued' });
      assert.equal((await log.handled('q')).payload, 'q');
    });

    storeTest(fixture, 'new filters move a message to the workers that accept them', async (h) => {
      const q = h.queue('update-filters');
      await h.client.configure(q, { filterEnums: { tier: ['low', 'high'] } });
      await h.client.enqueue(q, 'x', { id: 'x', filters: { tier: 'low' } });
      await assert.rejects(h.client.update(q, 'x', { filters: { tier: 'extreme' } }), FilterError);
      await assert.rejects(h.client.update(q, 'x', { filters: { region: 'eu' } }), FilterError);
      const log = new JobLog();
      h.worker(q, (job) => log.record(job), { filters: { tier: 'high' } });
      await quietPeriod();
      assert.deepEqual(log.ids(), []);
      assert.deepEqual(await h.client.update(q, 'x', { filters: { tier: 'high' } }), {
        ok: true,
        id: 'x',
        state: 'queued',
      });
      assert.deepEqual((await log.handled('x')).job.filters, { tier: 'high' });
    });

    storeTest(fixture, 'changes are checked as at enqueue, and a refused one changes nothing', async (h) => {
      const q = h.queue('update-checked');
      await h.client.enqueue(q, 'kept', { id: 'm', priority: 3 });
      await assert.rejects(h.client.update(q, 'm', { runAt: Date.now(), delayMs: 5 }), /runAt and delayMs/);
      await assert.rejects(h.client.update(q, 'm', { priority: 5000 }), /priority/);
      await assert.rejects(h.client.update(q, 'm', { delayMs: -1 }), /delayMs/);
      await assert.rejects(h.client.update(q, 'm', { runAt: loose('soon') }), /runAt/);
      await assert.rejects(h.client.update(q, 'm', loose({ lifo: true })), /lifo/);
      await assert.rejects(h.client.update(q, 'm', {}), /at least one of/);
      const limit = storeOf(h.client).capabilities.maxPayloadBytes;
      if (limit <= 16 * 1024 * 1024) {
        await assert.rejects(h.client.update(q, 'm', { payload: Buffer.alloc(limit + 1) }), PayloadTooLargeError);
      }
      const details = await h.client.show(q, 'm');
      assert.equal(details?.payload, 'kept');
      assert.equal(details.state, 'queued');
    });

    storeTest(fixture, 'unknown, held and finished messages are refused, nothing changed', async (h) => {
      const q = h.queue('update-refusals');
      await assert.rejects(h.client.update(q, 'nope', { priority: 1 }), MessageGoneError);
      const started = gate();
      const release = gate();
      const log = new JobLog();
      h.worker(q, async (job) => {
        log.record(job);
        if (job.id === 'held') {
          started.open();
          await release.opened;
        }
        if (job.id === 'bad') return { status: 'error', error: 'no' };
        return undefined;
      });
      await h.client.enqueue(q, 'old', { id: 'held' });
      await within(10_000, started.opened, 'the handler starting');
      assert.deepEqual(await h.client.update(q, 'held', { payload: 'new' }), {
        ok: false,
        id: 'held',
        state: 'locked',
      });
      release.open();
      await waitForStatus(h.client, q, 'held', 'done-awaiting-gc');
      assert.deepEqual(
        log.of('held').map((s) => s.payload),
        ['old'],
      );
      assert.deepEqual(await h.client.update(q, 'held', { priority: 2 }), {
        ok: false,
        id: 'held',
        state: 'done-awaiting-gc',
      });
      await h.client.enqueue(q, 'x', { id: 'bad', attempts: 1 });
      await waitForStatus(h.client, q, 'bad', 'failed');
      assert.deepEqual(await h.client.update(q, 'bad', { delayMs: 0 }), { ok: false, id: 'bad', state: 'failed' });
    });

    storeTest(fixture, 'a debounced message still takes later enqueues; a LIFO one still runs first', async (h) => {
      const q = h.queue('update-debounce-lifo');
      await h.client.enqueue(q, 'one', { id: 'deb', debounce: { id: 'k', ms: LATER_MS } });
      await h.client.update(q, 'deb', { payload: 'two', priority: 4 });
      const again = await h.client.enqueue(q, 'three', { id: 'other', debounce: { id: 'k', ms: 0 } });
      assert.deepEqual(again, { ok: true, id: 'deb', action: 'debounced' });
      await h.client.enqueue(q, 'plain', { id: 'plain', priority: 4 });
      await h.client.enqueue(q, 'lifo', { id: 'lifo', priority: 4, lifo: true });
      await h.client.update(q, 'lifo', { payload: 'lifo-new' });
      assert.equal((await h.client.show(q, 'deb'))?.payload, 'three');
      const order = await handledOrder(h, q, 3);
      assert.equal(order[0], 'lifo');
      assert.deepEqual(new Set(order), new Set(['lifo', 'deb', 'plain']));
    });

    storeTest(
      fixture,
      'updates racing claims: each message runs once, wholly old (update refused) or wholly new',
      async (h) => {
        const q = h.queue('update-race');
        const ids = Array.from({ length: 40 }, (_, i) => `m${i}`);
        for (const id of ids) await h.client.enqueue(q, { v: 'old', id }, { id, priority: 5 });
        const log = new JobLog();
        const other = await h.connect();
        // Handlers that take a moment keep the queue from draining before the updates arrive.
        const handle = async (job: Job): Promise<undefined> => {
          log.record(job);
          await sleep(20);
          return undefined;
        };
        h.worker(q, handle, { concurrency: 2 });
        h.worker(q, handle, { concurrency: 2 }, other);
        await waitFor(() => log.seen.length > 0, { what: 'a first claim' });
        const results = await Promise.all(
          ids.map((id) => h.client.update(q, id, { payload: { v: 'new', id }, priority: 1 })),
        );
        await log.count(ids.length);
        await quietPeriod();
        assert.equal(log.seen.length, ids.length, 'each message ran once');
        for (const result of results) {
          const [seen] = log.of(result.id);
          assert.ok(seen !== undefined, `${result.id} ran`);
          const expected = result.ok ? 'new' : 'old';
          assert.deepEqual(seen.payload, { v: expected, id: result.id }, `${result.id}: ${JSON.stringify(result)}`);
          if (!result.ok) assert.notEqual(result.state, null, result.id);
        }
        for (const id of ids) await waitForStatus(h.client, q, id, 'done-awaiting-gc');
      },
    );
  });
}
