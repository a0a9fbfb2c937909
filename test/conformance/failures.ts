/**
 * Failures kept, shown and acted on: the failed state and its lifetime,
 * history, retry and redrive, remove, promote, maxDeliveries, a message's own
 * retry policy and the dead-letter queue.
 */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { claimAndVanish } from '../support/claims.js';
import { storeTest } from '../support/harness.js';
import { JobLog, stateOf, waitForStatus } from '../support/jobs.js';
import { gate, quietPeriod, untilAborted, waitFor } from '../support/wait.js';
import type { StoreFixture } from '../support/fixture.js';
import { storeOf } from '../../src/client/client-store.js';

const LONG_MS = 60_000;

export function failures(fixture: StoreFixture): void {
  void describe('failures kept and acted on', () => {
    storeTest(fixture, 'a final error is failed, counted apart, with its history and content', async (h) => {
      const q = h.queue('failed');
      const worker = h.worker(
        q,
        (job) => {
          if (job.id === 'ok') return undefined;
          if (job.attempt === 1) return { status: 'retry', backoffMs: 0, error: 'try again' };
          if (job.attempt === 2) return { status: 'error', error: `broken\n${'x'.repeat(2000)}\nlast line` };
          throw new Error('no third attempt');
        },
        { maxAttempts: 2, retryBackoffMs: 0 },
      );
      const started = Date.now();
      await h.client.enqueue(q, 'fine', { id: 'ok' });
      await h.client.enqueue(
        q,
        { order: 7 },
        { id: 'bad', metadata: { from: 'test' }, attempts: 2, backoff: { type: 'fixed', delayMs: 0 } },
      );
      const failed = await waitForStatus(h.client, q, 'bad', 'failed');
      await waitForStatus(h.client, q, 'ok', 'done-awaiting-gc');
      assert.equal(failed.outcome, 'error');
      assert.equal(failed.attempt, 2);
      assert.match(failed.lastError ?? '', /^broken\nx{2000}\nlast line$/, 'lastError is kept whole');
      assert.equal(failed.consumer, null);
      assert.equal(failed.until, null);

      const status = await h.client.queueStatus(q);
      assert.equal(status.counts.failed, 1);
      assert.equal(status.counts['done-awaiting-gc'], 1, 'the failure is not counted as a success');
      assert.equal(status.total, 2);

      const details = await h.client.show(q, 'bad');
      assert.ok(details !== null);
      assert.equal(details.state, 'failed');
      assert.deepEqual(details.payload, { order: 7 });
      assert.deepEqual(details.metadata, { from: 'test' });
      assert.deepEqual(details.filters, {});
      assert.deepEqual(details.policy, { attempts: 2, backoff: { type: 'fixed', delayMs: 0 } });
      assert.deepEqual(
        details.history.map((r) => [r.attempt, r.outcome, r.consumer]),
        [
          [1, 'retry', worker.id],
          [2, 'error', worker.id],
        ],
      );
      const [first, second] = details.history;
      assert.ok(first !== undefined && second !== undefined);
      assert.equal(first.error, 'try again');
      assert.ok(first.startedAt !== null && first.startedAt >= started - 1000);
      assert.ok(first.endedAt >= first.startedAt - 1000, 'ends after it starts (clocks may differ a little)');
      const tail = second.error ?? '';
      assert.ok(tail.length <= 500, `the error is cut to 500 characters, not ${tail.length}`);
      assert.match(tail, /^broken\n…x+\nlast line$/);
      assert.match(tail, /last line/);
      assert.equal(await h.client.show(q, 'never'), null);
      const ok = await h.client.show(q, 'ok');
      assert.deepEqual(ok?.history, [], 'a plain success writes no history');
    });

    storeTest(fixture, 'retry queues a failed message again at attempt 1, history kept', async (h) => {
      const q = h.queue('retry');
      let failing = true;
      const log = new JobLog();
      h.worker(q, (job) => {
        log.record(job);
        if (failing) return { status: 'error', error: 'down' };
        return undefined;
      });
      await h.client.enqueue(q, 'x', { id: 'm' });
      await waitForStatus(h.client, q, 'm', 'failed');
      assert.deepEqual(await h.client.retry(q, 'nope'), { ok: false, id: 'nope', state: null });
      failing = false;
      assert.deepEqual(await h.client.retry(q, 'm'), { ok: true, id: 'm', state: 'queued' });
      const done = await waitForStatus(h.client, q, 'm', 'done-awaiting-gc');
      assert.equal(done.attempt, 1);
      assert.equal(done.outcome, 'success');
      assert.deepEqual(
        log.seen.map((s) => s.attempt),
        [1, 1],
      );
      const details = await h.client.show(q, 'm');
      assert.deepEqual(
        details?.history.map((r) => [r.attempt, r.outcome, r.error]),
        [[1, 'error', 'down']],
      );
      assert.deepEqual(await h.client.retry(q, 'm'), { ok: false, id: 'm', state: 'done-awaiting-gc' });
    });

    storeTest(fixture, 'retryFailed redrives every failed message and nothing else', async (h) => {
      const q = h.queue('redrive');
      let failing = true;
      h.worker(q, (job) => (failing ? { status: 'error', error: `no ${job.id}` } : undefined));
      const ids = ['a', 'b', 'c', 'd', 'e'];
      await h.client.enqueueBatch(
        q,
        ids.map((id) => ({ payload: id, id })),
      );
      for (const id of ids) await waitForStatus(h.client, q, id, 'failed');
      await h.client.enqueue(q, 'x', { id: 'later', initialBackoffMs: LONG_MS });
      assert.equal((await h.client.queueStatus(q)).counts.failed, ids.length);
      failing = false;
      assert.deepEqual(await h.client.retryFailed(q), { retried: ids.length });
      for (const id of ids) assert.equal((await waitForStatus(h.client, q, id, 'done-awaiting-gc')).attempt, 1);
      assert.equal(await stateOf(h.client, q, 'later'), 'queued-with-backoff');
      assert.deepEqual(await h.client.retryFailed(q), { retried: 0 });
      assert.equal((await h.client.queueStatus(q)).counts.failed, 0);
    });

    storeTest(fixture, 'remove takes a message in any state but locked; a failed id is free again', async (h) => {
      const q = h.queue('remove');
      const release = gate();
      const log = new JobLog();
      h.worker(q, async (job) => {
        log.record(job);
        if (job.id === 'bad') return { status: 'error', error: 'no' };
        await release.opened;
        return undefined;
      });
      await h.client.enqueue(q, 'x', { id: 'bad' });
      await waitForStatus(h.client, q, 'bad', 'failed');
      await h.client.enqueue(q, 'x', { id: 'held' });
      await log.handled('held');
      await h.client.enqueue(q, 'x', { id: 'later', initialBackoffMs: LONG_MS });

      assert.deepEqual(await h.client.remove(q, 'held'), { ok: false, id: 'held', state: 'locked' });
      assert.deepEqual(await h.client.remove(q, 'later'), { ok: true, id: 'later', state: null });
      assert.deepEqual(await h.client.remove(q, 'bad'), { ok: true, id: 'bad', state: null });
      assert.deepEqual(await h.client.remove(q, 'bad'), { ok: false, id: 'bad', state: null });
      assert.equal(await h.client.status(q, 'later'), null);
      assert.equal(await h.client.show(q, 'bad'), null);
      const counts = (await h.client.queueStatus(q)).counts;
      assert.equal(counts.failed, 0);
      assert.equal(counts['queued-with-backoff'], 0);
      assert.equal(counts.locked, 1);
      assert.deepEqual(await h.client.enqueue(q, 'y', { id: 'bad', initialBackoffMs: LONG_MS }), {
        ok: true,
        id: 'bad',
        action: 'added',
      });
      assert.deepEqual((await h.client.show(q, 'bad'))?.history, [], 'a removed message leaves no history');
      release.open();
      await waitForStatus(h.client, q, 'held', 'done-awaiting-gc');
    });

    storeTest(fixture, 'promote ends a backoff now; other states are refused with theirs', async (h) => {
      const q = h.queue('promote');
      await h.client.enqueue(q, 'x', { id: 'later', initialBackoffMs: LONG_MS });
      await h.client.enqueue(q, 'x', { id: 'now' });
      assert.deepEqual(await h.client.promote(q, 'now'), { ok: false, id: 'now', state: 'queued' });
      assert.deepEqual(await h.client.promote(q, 'ghost'), { ok: false, id: 'ghost', state: null });
      assert.deepEqual(await h.client.promote(q, 'later'), { ok: true, id: 'later', state: 'queued' });
      assert.equal(await stateOf(h.client, q, 'later'), 'queued');

      const log = new JobLog();
      h.worker(q, (job) => {
        log.record(job);
        if (job.id === 'again') return { status: 'success', backoffMs: LONG_MS };
        return undefined;
      });
      await log.handled('later', 1);
      await h.client.enqueue(q, 'x', { id: 'again' });
      await waitForStatus(h.client, q, 'again', 'done-with-backoff');
      assert.equal((await h.client.enqueue(q, 'y', { id: 'again', allowRequeue: true })).ok, true);
      await waitForStatus(h.client, q, 'again', 'done-with-requeue');
      assert.deepEqual(await h.client.promote(q, 'again'), { ok: true, id: 'again', state: 'queued' });
      await waitFor(() => log.of('again').length === 2, { what: 'the requeued run' });
      assert.deepEqual(
        log.of('again').map((s) => [s.attempt, s.payload]),
        [
          [1, 'x'],
          [1, 'x'],
        ],
      );
    });

    storeTest(fixture, 'pause stops every worker claiming; enqueues go on; resume hands them out', async (h) => {
      const q = h.queue('pause');
      const log = new JobLog();
      h.worker(q, (job) => log.record(job));
      const other = await h.connect();
      h.worker(q, (job) => log.record(job), {}, other);
      await h.client.enqueue(q, 'x', { id: 'before' });
      await log.handled('before');

      assert.deepEqual(await h.client.pause(q), { paused: true, created: false });
      assert.equal((await h.client.queueStatus(q)).paused, true);
      assert.equal((await h.client.config(q)).paused, true);
      const dryRuns = (await h.client.queueStatus(q)).dryRuns;
      await h.client.enqueueBatch(q, [
        { payload: 1, id: 'p1' },
        { payload: 2, id: 'p2' },
      ]);
      await quietPeriod(1500);
      assert.deepEqual(log.ids(), ['before'], 'nothing was claimed while paused');
      assert.equal(await stateOf(h.client, q, 'p1'), 'queued');
      assert.ok((await h.client.queueStatus(q)).dryRuns <= dryRuns + 2, 'a paused queue is not a dry queue');

      assert.deepEqual(await h.client.resume(q), { paused: false, created: false });
      await log.handled('p1');
      await log.handled('p2');
      assert.equal((await h.client.queueStatus(q)).paused, false);
    });

    storeTest(fixture, 'pausing a queue with no configuration creates it and says so', async (h) => {
      const q = h.queue('pause-new');
      assert.deepEqual(await h.client.pause(q), { paused: true, created: true });
      assert.deepEqual(await h.client.pause(q), { paused: true, created: false });
      assert.equal((await h.client.config(q)).paused, true);
      await h.client.enqueue(q, 'x', { id: 'waits' });
      const log = new JobLog();
      h.worker(q, (job) => log.record(job));
      await quietPeriod(500);
      assert.equal(log.seen.length, 0);
      await h.client.resume(q);
      await log.handled('waits');
    });

    storeTest(fixture, 'failed messages live failedLifetimeMs, successes gcLifetimeMs', async (h) => {
      const q = h.queue('gc-failed');
      await h.client.configure(q, { gcLifetimeMs: 0, failedLifetimeMs: LONG_MS });
      h.worker(q, (job) => (job.id === 'bad' ? { status: 'error', error: 'no' } : undefined));
      await h.client.enqueue(q, 'x', { id: 'good' });
      await h.client.enqueue(q, 'x', { id: 'bad' });
      await waitForStatus(h.client, q, 'bad', 'failed');
      // With a lifetime of 0 the worker's own GC may remove the success first: either way it goes.
      await waitFor(
        async () => {
          await h.client.gc(q);
          return (await h.client.status(q, 'good')) === null;
        },
        { what: 'GC to remove the success' },
      );
      assert.equal(await stateOf(h.client, q, 'bad'), 'failed');
      await h.client.configure(q, { failedLifetimeMs: 1 });
      await waitFor(async () => (await h.client.gc(q)).removed === 1 || (await h.client.status(q, 'bad')) === null, {
        what: 'GC to remove the failed message',
      });
      assert.equal(await h.client.status(q, 'bad'), null);
      assert.equal((await h.client.queueStatus(q)).counts.failed, 0);
    });

    storeTest(fixture, 'maxDeliveries: a message that loses its lock that many times fails', async (h) => {
      const q = h.queue('poison');
      await h.client.configure(q, { maxDeliveries: 2 });
      await h.client.enqueue(q, 'x', { id: 'm' });
      assert.equal(await claimAndVanish(h, q, 'vanished-1'), 1);
      await waitForStatus(h.client, q, 'm', 'queued', { timeoutMs: 10_000 });
      assert.equal(await claimAndVanish(h, q, 'vanished-2'), 2);
      await waitForStatus(h.client, q, 'm', 'queued', { timeoutMs: 10_000 });

      const log = new JobLog();
      h.worker(q, (job) => log.record(job));
      await h.client.enqueue(q, 'x', { id: 'next' });
      await log.handled('next');
      const failed = await waitForStatus(h.client, q, 'm', 'failed', { timeoutMs: 10_000 });
      assert.equal(log.of('m').length, 0, 'the poison message never reached the worker');
      assert.equal(failed.outcome, 'error');
      assert.match(failed.lastError ?? '', /lost its lock 2 times/);
      const history = (await h.client.show(q, 'm'))?.history ?? [];
      assert.deepEqual(
        history.map((r) => [r.attempt, r.outcome, r.startedAt]),
        [
          [1, 'lost', null],
          [2, 'lost', null],
        ],
      );
      assert.deepEqual(
        history.map((r) => r.consumer),
        ['vanished-1', 'vanished-2'],
      );
    });

    storeTest(fixture, "a message's own attempts, backoff and timeout override the worker's", async (h) => {
      const q = h.queue('policy');
      const log = new JobLog();
      h.worker(
        q,
        async (job) => {
          log.record(job);
          if (job.id === 'slow') await untilAborted(job.signal);
          throw new Error('always');
        },
        { maxAttempts: 1, timeoutMs: LONG_MS },
      );
      await h.client.enqueue(q, 'x', { id: 'thrice', attempts: 3, backoff: 20 });
      await h.client.enqueue(q, 'x', { id: 'slow', timeoutMs: 100 });
      const thrice = await waitForStatus(h.client, q, 'thrice', 'failed');
      assert.equal(thrice.attempt, 3);
      assert.deepEqual(
        log.of('thrice').map((s) => s.attempt),
        [1, 2, 3],
      );
      const slow = await waitForStatus(h.client, q, 'slow', 'failed');
      assert.equal(slow.lastError, 'timed out after 100 ms');
      assert.deepEqual((await h.client.show(q, 'slow'))?.policy, { timeoutMs: 100 });
      assert.deepEqual((await h.client.show(q, 'thrice'))?.policy, { attempts: 3, backoff: 20 });
    });

    storeTest(fixture, 'a dead-letter queue receives failed messages with their history', async (h) => {
      const q = h.queue('dlq-source');
      const dlq = h.queue('dlq');
      if (!storeOf(h.client).capabilities.deadLetterQueue) {
        await assert.rejects(h.client.configure(q, { deadLetterQueue: dlq }), /deadLetterQueue is not available/);
        assert.equal((await h.client.config(q)).deadLetterQueue, null, 'nothing was written');
        return;
      }
      await h.client.configure(q, { deadLetterQueue: dlq });
      const worker = h.worker(q, () => ({ status: 'error', error: 'cannot' }));
      await h.client.enqueue(dlq, 'taken', { id: 'clash', initialBackoffMs: LONG_MS });
      await h.client.enqueue(q, { n: 1 }, { id: 'm', metadata: { k: 'v' } });
      await h.client.enqueue(q, 'x', { id: 'clash' });

      const moved = await waitForStatus(h.client, dlq, 'm', 'queued');
      assert.equal(await h.client.status(q, 'm'), null);
      assert.equal(moved.outcome, 'error');
      assert.equal(moved.lastError, 'cannot');
      assert.equal(moved.attempt, 0);
      const details = await h.client.show(dlq, 'm');
      assert.deepEqual(details?.payload, { n: 1 });
      assert.deepEqual(details.metadata, { k: 'v' });
      assert.deepEqual(
        details.history.map((r) => [r.attempt, r.outcome, r.consumer, r.error]),
        [[1, 'error', worker.id, 'cannot']],
      );
      assert.equal((await h.client.queueStatus(dlq)).counts.queued, 1);

      // The id is taken in the dead-letter queue: the message stays failed where it is.
      const stayed = await waitForStatus(h.client, q, 'clash', 'failed');
      assert.equal(stayed.lastError, 'cannot');
      assert.equal(await stateOf(h.client, dlq, 'clash'), 'queued-with-backoff');

      const log = new JobLog();
      h.worker(dlq, (job) => log.record(job));
      assert.equal((await log.handled('m')).attempt, 1);
    });
  });
}
