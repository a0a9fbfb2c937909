/** The worker: concurrency, graceful and forced stop, wake-ups, autoStart. */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { storeTest, type Harness } from '../support/harness.js';
import { JobLog, stateOf, waitForStatus } from '../support/jobs.js';
import { gate, quietPeriod, waitFor, within } from '../support/wait.js';
import type { MonitorInfo } from '../../src/index.js';
import type { StoreFixture } from '../support/fixture.js';

// Idle workers in wake-up tests back off this long, so only a wake-up can explain a quick handling.
const LONG_EOQ_MS = 10_000;
const WAKE_WITHIN_MS = 2000;

export function worker(fixture: StoreFixture): void {
  void describe('worker', () => {
    storeTest(fixture, 'concurrency N runs N handlers at once, and no more', async (h) => {
      const q = h.queue('concurrency');
      const n = 3;
      let active = 0;
      let most = 0;
      const release = gate();
      const worker = h.worker(
        q,
        async () => {
          active += 1;
          most = Math.max(most, active);
          await release.opened;
          active -= 1;
        },
        { concurrency: n },
      );
      await h.client.enqueueBatch(
        q,
        Array.from({ length: 2 * n }, (_, i) => ({ payload: i })),
      );
      await waitFor(() => active === n, { what: () => `${n} handlers at once (now ${active})` });
      const counts = (await h.client.queueStatus(q)).counts;
      assert.equal(counts.locked, n);
      assert.equal(counts.queued, n);
      assert.equal(worker.inFlight, n);
      release.open();
      await waitFor(async () => (await h.client.queueStatus(q)).counts['done-awaiting-gc'] === 2 * n);
      assert.equal(most, n);
    });

    storeTest(
      fixture,
      'prefetch: messages claimed ahead wait for a free slot; a graceful stop gives back those not started',
      async (h) => {
        const q = h.queue('prefetch');
        let active = 0;
        let most = 0;
        const release = gate();
        const log = new JobLog();
        const worker = h.worker(
          q,
          async (job) => {
            log.record(job);
            active += 1;
            most = Math.max(most, active);
            await release.opened;
            active -= 1;
          },
          { concurrency: 1, prefetch: 2 },
        );
        await h.client.enqueueBatch(
          q,
          Array.from({ length: 5 }, (_, i) => ({ payload: i, id: `m${i}` })),
        );
        await waitFor(() => active === 1 && worker.inFlight === 3, {
          what: () => `1 handler and 3 messages held (now ${active} and ${worker.inFlight})`,
        });
        await waitFor(async () => (await h.client.queueStatus(q)).counts.locked === 3, { what: '3 locked' });
        assert.equal((await h.client.queueStatus(q)).counts.queued, 2);
        await quietPeriod(100);
        assert.equal(log.seen.length, 1, 'a prefetched message started while the slot was taken');

        const stopping = worker.stop();
        release.open();
        await stopping;
        assert.equal(most, 1);
        assert.equal(log.seen.length, 1, 'a prefetched message started during the stop');
        const counts = (await h.client.queueStatus(q)).counts;
        assert.equal(counts['done-awaiting-gc'], 1);
        assert.equal(counts.queued, 4, 'the prefetched messages went back to the queue');

        h.worker(q, (job) => log.record(job), { concurrency: 2, prefetch: 4 });
        await waitFor(async () => (await h.client.queueStatus(q)).counts['done-awaiting-gc'] === 5, {
          what: 'all 5 done',
        });
        assert.equal(log.seen.length, 5, 'each message handled once');
      },
    );

    storeTest(fixture, 'a second stop() releases prefetched messages with the running ones', async (h) => {
      const q = h.queue('prefetch-forced');
      const log = new JobLog();
      const worker = h.worker(q, (job) => log.recordUntilAborted(job), { concurrency: 1, prefetch: 2, lockMs: 30_000 });
      await h.client.enqueueBatch(
        q,
        Array.from({ length: 3 }, (_, i) => ({ payload: i, id: `m${i}` })),
      );
      await waitFor(() => log.seen.length === 1 && worker.inFlight === 3, { what: '1 running, 2 prefetched' });
      const first = worker.stop();
      await within(3000, worker.stop(), 'the second stop()');
      await within(3000, first, 'the first stop()');
      assert.equal(log.seen.length, 1);
      // Released at once, not left to their 30 s locks.
      assert.equal((await h.client.queueStatus(q)).counts.queued, 3);
    });

    storeTest(fixture, 'a worker takes only messages of its own queue', async (h) => {
      const mine = h.queue('mine');
      const theirs = h.queue('theirs');
      await h.client.enqueue(theirs, 'x', { id: 'theirs' });
      await h.client.enqueue(mine, 'x', { id: 'mine' });
      const log = new JobLog();
      const seen: MonitorInfo[] = [];
      h.worker(mine, (job) => log.record(job), { monitor: (info) => seen.push(info) });
      await log.handled('mine');
      await waitFor(() => seen.some((info) => info.dryRuns > 0), { what: 'a dry poll' });
      assert.deepEqual(log.ids(), ['mine']);
      assert.equal(await stateOf(h.client, theirs, 'theirs'), 'queued');
    });

    storeTest(
      fixture,
      'stop() waits for running handlers and records their outcomes; nothing new is taken',
      async (h) => {
        const q = h.queue('graceful');
        const release = gate();
        const log = new JobLog();
        const worker = h.worker(q, async (job) => {
          log.record(job);
          await release.opened;
          return { status: 'error', error: 'finished during stop' };
        });
        await h.client.enqueue(q, 'a', { id: 'a' });
        await log.handled('a');
        await h.client.enqueue(q, 'b', { id: 'b' });

        let stopped = false;
        const stopping = worker.stop().then(() => {
          stopped = true;
        });
        assert.equal(worker.running, false);
        // A few store round trips and a pause: stop() must still be waiting for the handler.
        for (let i = 0; i < 3; i += 1) await h.client.status(q, 'a');
        await quietPeriod(100);
        assert.equal(stopped, false, 'stop() returned while a handler was running');
        assert.equal(await stateOf(h.client, q, 'a'), 'locked');

        release.open();
        await stopping;
        const a = await h.client.status(q, 'a');
        assert.equal(a?.state, 'failed');
        assert.equal(a.lastError, 'finished during stop');
        assert.equal(await stateOf(h.client, q, 'b'), 'queued');
        assert.deepEqual(log.ids(), ['a']);
        assert.ok(!(await h.client.queueStatus(q)).consumers.some((c) => c.id === worker.id));
      },
    );

    storeTest(fixture, 'a second stop() while a handler hangs returns promptly and releases the message', async (h) => {
      const q = h.queue('forced');
      const log = new JobLog();
      const worker = h.worker(q, (job) => log.recordUntilAborted(job), { lockMs: 30_000 });
      await h.client.enqueue(q, 'x', { id: 'm' });
      const seen = await log.handled('m');
      const first = worker.stop();
      await within(3000, worker.stop(), 'the second stop()');
      await within(3000, first, 'the first stop()');
      assert.equal(seen.job.signal.aborted, true);
      assert.equal(worker.running, false);
      // Released at once, not left to its 30 s lock.
      const released = await h.client.status(q, 'm');
      assert.equal(released?.state, 'queued');
      assert.equal(released.attempt, 1);

      h.worker(q, (job) => log.record(job));
      await log.handled('m', 2);
      assert.equal((await waitForStatus(h.client, q, 'm', 'done-awaiting-gc')).attempt, 2);
    });

    storeTest(fixture, 'autoStart: false does nothing until start()', async (h) => {
      const q = h.queue('manual');
      const log = new JobLog();
      const seen: MonitorInfo[] = [];
      const worker = h.worker(q, (job) => log.record(job), { autoStart: false, monitor: (info) => seen.push(info) });
      await h.client.enqueue(q, 'x', { id: 'm' });
      await quietPeriod();
      assert.equal(worker.running, false);
      assert.equal(seen.length, 0);
      assert.equal(log.seen.length, 0);
      assert.equal(await stateOf(h.client, q, 'm'), 'queued');
      assert.deepEqual((await h.client.queueStatus(q)).consumers, []);

      await worker.start();
      assert.equal(worker.running, true);
      await log.handled('m');
      await assert.rejects(worker.start(), /running/);
    });

    storeTest(
      fixture,
      'an idle worker is woken by an enqueue on the same client',
      async (h) => {
        const q = h.queue('wake-same');
        const log = await idleWorker(h, q);
        const enqueuedAt = Date.now();
        await h.client.enqueue(q, 'x', { id: 'm' });
        const seen = await log.handled('m', 1, { timeoutMs: WAKE_WITHIN_MS });
        assert.ok(seen.at - enqueuedAt < WAKE_WITHIN_MS);
      },
      { capability: 'wakeups' },
    );

    storeTest(
      fixture,
      'an idle worker is woken by an enqueue from another client',
      async (h) => {
        const q = h.queue('wake-other');
        const log = await idleWorker(h, q);
        const producer = await h.connect({ maintenance: false });
        await producer.enqueue(q, 'x', { id: 'm' });
        await log.handled('m', 1, { timeoutMs: WAKE_WITHIN_MS });
      },
      { capability: 'wakeups' },
    );

    storeTest(
      fixture,
      'an idle worker is woken by an enqueue from another process',
      async (h) => {
        const q = h.queue('wake-process');
        const log = await idleWorker(h, q);
        const producer = h.spawn('producer-process.ts', [h.url, q, 'm']);
        await producer.line(/^enqueued m added$/);
        await log.handled('m', 1, { timeoutMs: WAKE_WITHIN_MS });
        assert.deepEqual((await producer.exited).code, 0);
      },
      { capability: 'wakeups' },
    );
  });
}

/** A worker that has polled, found nothing, and gone into a long end-of-queue backoff. */
async function idleWorker(h: Harness, q: string): Promise<JobLog> {
  const log = new JobLog();
  const seen: MonitorInfo[] = [];
  h.worker(q, (job) => log.record(job), { eoqBackoffMs: LONG_EOQ_MS, monitor: (info) => seen.push(info) });
  await waitFor(() => seen.some((info) => info.dryRuns >= 1), { what: 'the worker to find the queue empty' });
  return log;
}
