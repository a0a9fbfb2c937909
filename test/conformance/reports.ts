/**
 * What handlers report while they run (`job.progress`, `job.log`): stored with the message while its lock is
 * held, coalesced, bounded, written before the outcome and never after it, read back with `show`.
 */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { storeTest } from '../support/harness.js';
import { waitForStatus } from '../support/jobs.js';
import { gate, waitFor } from '../support/wait.js';
import { JobReportError, LOG_LINE_MAX_BYTES, LOG_MAX_LINES, type Job, type QueueEvent } from '../../src/index.js';
import type { StoreFixture } from '../support/fixture.js';
import { storeOf } from '../../src/client/client-store.js';

const STALLED = 'stalled-consumer';

export function reports(fixture: StoreFixture): void {
  void describe('progress and log', () => {
    storeTest(fixture, 'the last progress and every line are stored before the outcome, coalesced', async (h) => {
      const q = h.queue('progress');
      await h.client.configure(q, { events: true });
      h.worker(q, (job) => {
        job.log('starting');
        // A chatty handler: a thousand reports in one go reach the store as a few writes.
        for (let i = 1; i <= 1000; i++) assert.equal(job.progress({ done: i, of: 1000 }), true);
        job.log('finished');
      });
      await h.client.enqueue(q, 'x', { id: 'm' });
      await waitForStatus(h.client, q, 'm', 'done-awaiting-gc');
      const shown = await h.client.show(q, 'm');
      assert.deepEqual(shown?.progress, { done: 1000, of: 1000 });
      assert.deepEqual(shown.log, ['starting', 'finished']);
      assert.equal(shown.logDropped, 0);

      const events = (await h.client.readEvents(q)).events.filter((e) => e.id === 'm');
      const progress = events.filter((e) => e.type === 'progress');
      assert.ok(progress.length >= 1 && progress.length <= 3, `${progress.length} progress events`);
      assert.deepEqual(progress.at(-1)?.progress, { done: 1000, of: 1000 });
      assert.equal(progress.at(-1)?.error, undefined);
      // The finish comes after the last report.
      const types = events.map((e: QueueEvent) => e.type);
      assert.equal(types.at(-1), 'completed');
    });

    storeTest(fixture, 'progress is readable while the handler runs', async (h) => {
      const q = h.queue('progress-live');
      const release = gate();
      // Taken apart, as handlers take their job: the methods stay bound to it.
      h.worker(q, async ({ progress, log }) => {
        progress(42);
        log('half way');
        await release.opened;
      });
      await h.client.enqueue(q, 'x', { id: 'm' });
      const shown = await waitFor(async () => {
        const details = await h.client.show(q, 'm');
        return details?.progress === 42 && details.log.length === 1 ? details : null;
      });
      assert.equal(shown.state, 'locked');
      assert.deepEqual(shown.log, ['half way']);
      const listed = await h.client.list(q, { state: 'locked' });
      assert.deepEqual(
        listed.messages.map((m) => [m.id, m.progress]),
        [['m', 42]],
      );
      release.open();
      await waitForStatus(h.client, q, 'm', 'done-awaiting-gc');
    });

    storeTest(fixture, 'a report after the handler returned is refused and never reaches the store', async (h) => {
      const q = h.queue('progress-late');
      let kept: Job | null = null;
      h.worker(q, (job) => {
        kept = job;
        job.progress(1);
      });
      await h.client.enqueue(q, 'x', { id: 'm' });
      await waitForStatus(h.client, q, 'm', 'done-awaiting-gc');
      const late = kept as Job | null;
      assert.ok(late !== null);
      assert.equal(late.progress(2), false);
      assert.equal(late.log('late'), false);
      await new Promise((resolve) => setTimeout(resolve, 400));
      const shown = await h.client.show(q, 'm');
      assert.equal(shown?.progress, 1);
      assert.deepEqual(shown.log, []);
      assert.equal(shown.state, 'done-awaiting-gc');
    });

    storeTest(fixture, "a stale holder's report is refused: lost, and nothing is written", async (h) => {
      const q = h.queue('progress-stale');
      const store = storeOf(h.client);
      await h.client.enqueue(q, 'x', { id: 'm' });
      const request = { consumerId: STALLED, max: 1, lockMs: 300, accepts: null, eoqBackoffMs: () => 50 };
      assert.equal((await store.claim(q, request)).messages.length, 1);
      assert.ok(store.report !== undefined);
      const stale = { id: 'm', attempt: 1, progress: '"stale"', lines: ['stale'] };
      // Its own attempt while held: stored.
      assert.deepEqual(await store.report(q, STALLED, [{ ...stale, progress: '1', lines: [] }]), ['ok']);
      assert.deepEqual(await store.report(q, 'another-consumer', [stale]), ['lost']);
      await waitForStatus(h.client, q, 'm', 'queued');
      const release = gate();
      h.worker(q, async (job) => {
        job.progress(2);
        await release.opened;
      });
      await waitFor(async () => (await h.client.show(q, 'm'))?.progress === 2);
      assert.deepEqual(await store.report(q, STALLED, [stale]), ['lost']);
      release.open();
      await waitForStatus(h.client, q, 'm', 'done-awaiting-gc');
      assert.deepEqual(await store.report(q, STALLED, [stale]), ['lost']);
      const shown = await h.client.show(q, 'm');
      assert.equal(shown?.progress, 2);
      assert.deepEqual(shown.log, []);
    });

    storeTest(fixture, "a removed message's progress and log go with it", async (h) => {
      const q = h.queue('progress-removed');
      h.worker(q, (job) => {
        if (job.payload === 'first') {
          job.progress(1);
          job.log('first run');
        }
      });
      await h.client.enqueue(q, 'first', { id: 'm' });
      await waitForStatus(h.client, q, 'm', 'done-awaiting-gc');
      assert.equal((await h.client.show(q, 'm'))?.progress, 1);
      assert.equal((await h.client.remove(q, 'm')).ok, true);
      await h.client.enqueue(q, 'second', { id: 'm' });
      await waitForStatus(h.client, q, 'm', 'done-awaiting-gc');
      const shown = await h.client.show(q, 'm');
      assert.equal(shown?.progress, null);
      assert.deepEqual(shown.log, []);
    });

    storeTest(fixture, 'progress and log move with a message to the dead-letter queue', async (h) => {
      if (!storeOf(h.client).capabilities.deadLetterQueue) return;
      const q = h.queue('progress-dlq-source');
      const dlq = h.queue('progress-dlq');
      await h.client.configure(q, { deadLetterQueue: dlq });
      h.worker(q, (job) => {
        job.progress(0.5);
        job.log('gave up');
        return { status: 'error', error: 'cannot' };
      });
      await h.client.enqueue(q, 'x', { id: 'm' });
      await waitForStatus(h.client, dlq, 'm', 'queued');
      const shown = await h.client.show(dlq, 'm');
      assert.equal(shown?.progress, 0.5);
      assert.deepEqual(shown.log, ['gave up']);
    });

    storeTest(fixture, 'the log keeps its newest lines within its limits and counts those dropped', async (h) => {
      const q = h.queue('log-bounds');
      const long = 'é'.repeat(LOG_LINE_MAX_BYTES);
      h.worker(q, (job) => {
        for (let i = 1; i <= LOG_MAX_LINES + 5; i++) job.log(`line ${i}`);
        job.log(long);
      });
      await h.client.enqueue(q, 'x', { id: 'm' });
      await waitForStatus(h.client, q, 'm', 'done-awaiting-gc');
      const shown = await h.client.show(q, 'm');
      assert.equal(shown?.log.length, LOG_MAX_LINES);
      assert.equal(shown.logDropped, 6);
      assert.equal(shown.log[0], 'line 7');
      const cut = shown.log.at(-1) ?? '';
      assert.match(cut, /… \[2048 more bytes cut\]$/);
      assert.ok(Buffer.byteLength(cut) <= LOG_LINE_MAX_BYTES + 40);
      assert.equal(shown.progress, null);
    });

    storeTest(fixture, 'a value that cannot be stored is a JobReportError; the rest is kept', async (h) => {
      const q = h.queue('progress-bad');
      const thrown: unknown[] = [];
      const attempt = (fn: () => unknown): void => {
        try {
          fn();
        } catch (error) {
          thrown.push(error);
        }
      };
      h.worker(q, (job) => {
        job.progress(1);
        const circular: Record<string, unknown> = {};
        circular.self = circular;
        attempt(() => job.progress(circular));
        attempt(() => job.progress(undefined));
        attempt(() => job.progress(10n));
        attempt(() => job.progress('x'.repeat(5000)));
        attempt(() => job.log(5 as unknown as string));
      });
      await h.client.enqueue(q, 'x', { id: 'm' });
      const done = await waitForStatus(h.client, q, 'm', 'done-awaiting-gc');
      assert.equal(done.outcome, 'success');
      assert.equal(thrown.length, 5);
      for (const error of thrown) assert.ok(error instanceof JobReportError, String(error));
      assert.match(String(thrown[3]), /over the limit of 4096/);
      const shown = await h.client.show(q, 'm');
      assert.equal(shown?.progress, 1);
      assert.equal(shown.attempt, 1);
    });
  });
}
