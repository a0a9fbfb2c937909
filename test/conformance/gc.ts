/** GC of finished messages, driven by configuration stored in the store (zkmq's conf/). */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { storeTest } from '../support/harness.js';
import { JobLog, stateOf, waitForState, waitForStatus } from '../support/jobs.js';
import { waitFor } from '../support/wait.js';
import type { StoreFixture } from '../support/fixture.js';
import { storeOf } from '../../src/client/client-store.js';

const LIFETIME_MS = 1000;
const HOUR_MS = 3_600_000;

export function gc(fixture: StoreFixture): void {
  void describe('gc and configuration', () => {
    storeTest(fixture, 'configure() round-trips through config(), and a second client sees it', async (h) => {
      const q = h.queue('config');
      const defaults = {
        gcLifetimeMs: 300_000,
        failedLifetimeMs: 7 * 24 * HOUR_MS,
        keepDone: null,
        keepFailed: null,
        gcIntervalMs: 30_000,
        filterEnums: {},
        paused: false,
        maxDeliveries: 10,
        deadLetterQueue: null,
        events: false,
        eventsMaxCount: 10_000,
        eventsMaxAgeMs: 24 * HOUR_MS,
        rateLimit: null,
        groupConcurrency: null,
        groupRateLimit: null,
      };
      assert.deepEqual(await h.client.config(q), defaults);
      const written = await h.client.configure(q, { gcLifetimeMs: 1234, gcIntervalMs: 567 });
      assert.deepEqual(written, { ...defaults, gcLifetimeMs: 1234, gcIntervalMs: 567 });
      // A store that cannot move messages between queues atomically refuses a dead-letter queue.
      const dlq = storeOf(h.client).capabilities.deadLetterQueue ? h.queue('config-dlq') : null;
      const patch = {
        failedLifetimeMs: 4321,
        maxDeliveries: 3,
        deadLetterQueue: dlq,
        paused: true,
        events: true,
        eventsMaxCount: 50,
        eventsMaxAgeMs: 60_000,
        rateLimit: { max: 5, perMs: 1000 },
        groupConcurrency: 2,
        keepDone: 100,
        keepFailed: 0,
      };
      const every = await h.client.configure(q, patch);
      assert.deepEqual(every, { ...written, ...patch });
      assert.deepEqual(await h.client.config(q), every);
      await h.client.configure(q, {
        failedLifetimeMs: 7 * 24 * HOUR_MS,
        maxDeliveries: 10,
        deadLetterQueue: null,
        events: false,
        eventsMaxCount: 10_000,
        eventsMaxAgeMs: 24 * HOUR_MS,
        rateLimit: null,
        groupConcurrency: null,
        keepDone: null,
        keepFailed: null,
      });
      assert.deepEqual(await h.client.configure(q, { paused: false }), written);
      assert.deepEqual(await h.client.config(q), written);
      const other = await h.connect();
      assert.deepEqual(await other.config(q), written);

      // Enums merge per name; an empty list removes one; other fields stay.
      await other.configure(q, { filterEnums: { size: ['s', 'l'], colour: ['red'] } });
      await other.configure(q, { filterEnums: { colour: [] } });
      assert.deepEqual(await h.client.config(q), { ...written, filterEnums: { size: ['s', 'l'] } });
      // Configuration is per queue.
      assert.deepEqual((await h.client.config(h.queue('unconfigured'))).filterEnums, {});
    });

    storeTest(
      fixture,
      'gc() removes done messages older than the lifetime, keeps younger, backed-off and pending ones',
      async (h) => {
        const q = h.queue('gc');
        await h.client.configure(q, { gcLifetimeMs: LIFETIME_MS, gcIntervalMs: HOUR_MS });
        const producer = await h.connect({ maintenance: false });
        const log = new JobLog();
        h.worker(q, (job) => {
          log.record(job);
          return { status: 'success', backoffMs: job.id === 'backoff' ? HOUR_MS : 0 };
        });
        await producer.enqueue(q, 'x', { id: 'old' });
        await producer.enqueue(q, 'x', { id: 'backoff' });
        await producer.enqueue(q, 'x', { id: 'pending', initialBackoffMs: HOUR_MS });
        const old = await waitForStatus(h.client, q, 'old', 'done-awaiting-gc');
        await waitForStatus(h.client, q, 'backoff', 'done-with-backoff');
        await waitFor(() => Date.now() > old.updatedAt + LIFETIME_MS + 50, { what: 'the lifetime to pass' });
        await producer.enqueue(q, 'x', { id: 'young' });
        await waitForStatus(h.client, q, 'young', 'done-awaiting-gc');

        assert.deepEqual(await h.client.gc(q), { ran: true, removed: 1 });
        assert.equal(await h.client.status(q, 'old'), null);
        assert.equal((await h.client.status(q, 'young'))?.state, 'done-awaiting-gc');
        assert.equal((await h.client.status(q, 'backoff'))?.state, 'done-with-backoff');
        assert.equal((await h.client.status(q, 'pending'))?.state, 'queued-with-backoff');
        assert.equal((await h.client.queueStatus(q)).total, 3);
        // Gone means gone: the id is new again.
        assert.deepEqual(await producer.enqueue(q, 'x', { id: 'old' }), { ok: true, id: 'old', action: 'added' });
      },
    );

    storeTest(
      fixture,
      'gc() keeps the newest keepDone successes and keepFailed failures however young; one refusing duplicates stays',
      async (h) => {
        const q = h.queue('gc-keep');
        await h.client.configure(q, { gcLifetimeMs: HOUR_MS, gcIntervalMs: HOUR_MS, keepDone: 2, keepFailed: 1 });
        const producer = await h.connect({ maintenance: false });
        h.worker(
          q,
          (job) => {
            if (job.id.startsWith('f')) return { status: 'error', error: 'failed on purpose' };
            return { status: 'success', backoffMs: job.id === 'refusing' ? HOUR_MS : 0 };
          },
          { concurrency: 1 },
        );
        // One at a time, so they finish in this order.
        for (const id of ['refusing', 'd1', 'd2', 'd3', 'd4', 'f1', 'f2']) {
          await producer.enqueue(q, 'x', { id });
          const state = id === 'refusing' ? 'done-with-backoff' : id.startsWith('f') ? 'failed' : 'done-awaiting-gc';
          await waitForStatus(h.client, q, id, state);
        }
        assert.deepEqual(await h.client.gc(q), { ran: true, removed: 3 });
        for (const id of ['d1', 'd2', 'f1']) assert.equal(await h.client.status(q, id), null, `${id} removed`);
        for (const id of ['d3', 'd4']) assert.equal((await h.client.status(q, id))?.state, 'done-awaiting-gc');
        assert.equal((await h.client.status(q, 'f2'))?.state, 'failed');
        assert.equal((await h.client.status(q, 'refusing'))?.state, 'done-with-backoff', 'still refusing duplicates');
        const { counts, total } = await h.client.queueStatus(q);
        assert.deepEqual([counts['done-awaiting-gc'], counts.failed, total], [2, 1, 4]);
        // Nothing more to remove: a second run keeps the same.
        assert.deepEqual(await h.client.gc(q), { ran: true, removed: 0 });
      },
    );

    storeTest(
      fixture,
      'keepDone 0: a plain success goes at its finish on the SQL stores, else at the next gc(); one with a result waits for GC',
      async (h) => {
        const q = h.queue('gc-keep-none');
        await h.client.configure(q, { gcLifetimeMs: HOUR_MS, gcIntervalMs: HOUR_MS, keepDone: 0, events: true });
        // A GC now: the worker's own first one, due at once otherwise, would race the finishes.
        await h.client.gc(q);
        const producer = await h.connect({ maintenance: false });
        h.worker(
          q,
          (job) =>
            job.id === 'result'
              ? { status: 'success', result: 7 }
              : { status: 'success', backoffMs: job.id === 'refusing' ? HOUR_MS : 0 },
          { concurrency: 1 },
        );
        for (const id of ['plain', 'result', 'refusing']) {
          await producer.enqueue(q, 'x', { id });
          // The event, as the status of a success removed at its finish is gone.
          await waitFor(
            async () => (await h.client.readEvents(q)).events.some((e) => e.type === 'completed' && e.id === id),
            { what: `${id} completed` },
          );
        }
        const atFinish = fixture.removesSuccessesAtFinish === true;
        assert.equal(await stateOf(h.client, q, 'plain'), atFinish ? null : 'done-awaiting-gc');
        assert.equal(await stateOf(h.client, q, 'result'), 'done-awaiting-gc');
        assert.equal(await stateOf(h.client, q, 'refusing'), 'done-with-backoff');
        assert.deepEqual(await h.client.gc(q), { ran: true, removed: atFinish ? 1 : 2 });
        for (const id of ['plain', 'result']) assert.equal(await stateOf(h.client, q, id), null, `${id} removed`);
        const { counts, total } = await h.client.queueStatus(q);
        assert.deepEqual([counts['done-with-backoff'], total], [1, 1]);
        // The id is free again.
        assert.deepEqual(await producer.enqueue(q, 'y', { id: 'plain' }), { ok: true, id: 'plain', action: 'added' });
      },
    );

    storeTest(fixture, 'workers run GC by themselves at the stored interval', async (h) => {
      const q = h.queue('gc-auto');
      await h.client.configure(q, { gcLifetimeMs: 0, gcIntervalMs: 100 });
      const producer = await h.connect({ maintenance: false });
      const log = new JobLog();
      h.worker(q, (job) => log.record(job));
      await producer.enqueue(q, 'x', { id: 'm' });
      await log.handled('m');
      await waitForState(h.client, q, 'm', null, { what: 'the worker to GC the message' });
      assert.equal((await h.client.queueStatus(q)).total, 0);
    });
  });
}
