/** timeoutMs: an overrunning handler is aborted, its attempt retried or failed, its late result dropped. */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { storeTest } from '../support/harness.js';
import { JobLog, waitForStatus } from '../support/jobs.js';
import { gate, quietPeriod, waitFor, within } from '../support/wait.js';
import type { FailedEvent, RetryingEvent } from '../../src/index.js';
import type { StoreFixture } from '../support/fixture.js';

const TIMEOUT_MS = 200;

export function timeout(fixture: StoreFixture): void {
  void describe('timeoutMs', () => {
    storeTest(fixture, 'the signal is aborted and the attempt retried under maxAttempts, then failed', async (h) => {
      const q = h.queue('timeout');
      const log = new JobLog();
      const worker = h.worker(
        q,
        async (job) => {
          await log.recordUntilAborted(job);
          return { status: 'success' };
        },
        { timeoutMs: TIMEOUT_MS, maxAttempts: 2, retryBackoffMs: 0 },
      );
      const retrying: RetryingEvent[] = [];
      const failed: FailedEvent[] = [];
      worker.on('retrying', (event) => retrying.push(event));
      worker.on('failed', (event) => failed.push(event));
      worker.on('completed', ({ id }) => assert.fail(`${id} completed`));
      await h.client.enqueue(q, 'x', { id: 'm' });

      const done = await waitForStatus(h.client, q, 'm', 'failed');
      assert.equal(done.attempt, 2);
      assert.equal(done.outcome, 'error');
      assert.equal(done.lastError, `timed out after ${TIMEOUT_MS} ms`);
      await waitFor(() => failed.length === 1, { what: 'the failed event' });
      assert.deepEqual(
        log.seen.map((s) => s.attempt),
        [1, 2],
      );
      for (const { job } of log.seen) {
        assert.equal(job.signal.aborted, true);
        const reason: unknown = job.signal.reason;
        assert.ok(reason instanceof Error);
        assert.equal(reason.name, 'TimeoutError');
        assert.equal(reason.message, `timed out after ${TIMEOUT_MS} ms`);
      }
      assert.deepEqual(
        retrying.map((e) => [e.id, e.attempt, e.reason, e.error, e.backoffMs]),
        [['m', 1, 'timeout', `timed out after ${TIMEOUT_MS} ms`, 0]],
      );
      assert.deepEqual(
        failed.map((e) => [e.id, e.attempt, e.reason, e.error]),
        [['m', 2, 'timeout', `timed out after ${TIMEOUT_MS} ms`]],
      );
      assert.ok(failed.every((e) => e.durationMs >= TIMEOUT_MS - 5));
    });

    storeTest(
      fixture,
      'a handler that ignores its signal frees its slot at the timeout; its late result is discarded',
      async (h) => {
        const q = h.queue('timeout-ignored');
        const log = new JobLog();
        const release = gate();
        const worker = h.worker(
          q,
          async (job) => {
            log.record(job);
            if (job.id === 'slow') await release.opened;
            return { status: 'success' };
          },
          { concurrency: 1, timeoutMs: TIMEOUT_MS },
        );
        const completed: string[] = [];
        worker.on('completed', ({ id }) => completed.push(id));
        await h.client.enqueue(q, 'x', { id: 'slow' });
        await log.handled('slow');
        await h.client.enqueue(q, 'x', { id: 'next' });

        // The one slot went to `next` while `slow` still runs.
        await log.handled('next');
        assert.equal(release.isOpen, false);
        const slow = await waitForStatus(h.client, q, 'slow', 'failed');
        assert.equal(slow.outcome, 'error');
        assert.equal(slow.lastError, `timed out after ${TIMEOUT_MS} ms`);
        await waitFor(() => completed.includes('next'), { what: 'next to complete' });

        // A graceful stop does not wait for the abandoned handler.
        await within(3000, worker.stop(), 'stop() with an abandoned handler');
        release.open();
        await quietPeriod(100);
        const after = await h.client.status(q, 'slow');
        assert.equal(after?.outcome, 'error', 'the late success was discarded');
        assert.equal(after.attempt, 1);
        assert.deepEqual(completed, ['next']);
      },
    );
  });
}
