/** A message's way through the states: handled, locked, finished by each outcome, retried, revived. */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe } from 'node:test';
import type { HandlerResult, MessageStatus } from '../../src/index.js';
import { storeTest, type Harness } from '../support/harness.js';
import { JobLog, waitForStatus } from '../support/jobs.js';
import { gate } from '../support/wait.js';
import type { StoreFixture } from '../support/fixture.js';

// Backoffs a test observes from outside: long enough to read the state, short enough to wait out.
const BACKOFF_MS = 1000;
// How far a store's own timestamps may sit from the expected ones.
const CLOCK_SLACK_MS = 50;

/**
 * Enqueues message m and lets a worker's handler end its first attempt with `result`, stopping the worker while
 * the handler runs so nobody takes the message before the test looks; returns m's status then.
 */
async function firstAttemptThenStop(h: Harness, q: string, log: JobLog, result: HandlerResult): Promise<MessageStatus> {
  const release = gate();
  const first = h.worker(q, async (job) => {
    log.record(job);
    await release.opened;
    return result;
  });
  await h.client.enqueue(q, 'x', { id: 'm' });
  await log.handled('m', 1);
  const stopping = first.stop();
  release.open();
  await stopping;
  const status = await h.client.status(q, 'm');
  assert.ok(status);
  return status;
}

export function lifecycle(fixture: StoreFixture): void {
  void describe('lifecycle', () => {
    storeTest(fixture, 'a handled message is locked with attempt 1, then done-awaiting-gc on success', async (h) => {
      const q = h.queue('locked');
      const release = gate();
      const log = new JobLog();
      const worker = h.worker(
        q,
        async (job) => {
          log.record(job);
          await release.opened;
        },
        { lockMs: 5000 },
      );
      await h.client.enqueue(q, 'x', { id: 'm' });
      assert.equal((await log.handled('m')).attempt, 1);

      const locked = await h.client.status(q, 'm');
      assert.ok(locked);
      assert.equal(locked.state, 'locked');
      assert.equal(locked.attempt, 1);
      assert.equal(locked.consumer, worker.id);
      assert.ok(locked.until !== null && locked.until > Date.now(), 'a lock has an end in the future');
      assert.ok(locked.until <= Date.now() + 5000 + CLOCK_SLACK_MS, 'the lock ends within lockMs');
      assert.deepEqual(await h.client.enqueue(q, 'y', { id: 'm' }), { ok: false, id: 'm', state: 'locked' });

      // Held a while, so the finish's time is apart from the claim's.
      await sleep(40);
      release.open();
      const done = await waitForStatus(h.client, q, 'm', 'done-awaiting-gc');
      assert.equal(done.outcome, 'success');
      assert.equal(done.attempt, 1);
      assert.equal(done.consumer, null);
      assert.equal(done.lastError, null);
      assert.ok(done.updatedAt >= done.enqueuedAt);
      assert.ok(
        done.updatedAt >= locked.updatedAt + 30,
        `updated at the finish (${done.updatedAt}), not the claim (${locked.updatedAt})`,
      );
      const counts = (await h.client.queueStatus(q)).counts;
      assert.equal(counts['done-awaiting-gc'], 1);
      assert.equal(counts.locked, 0);
      assert.equal(log.seen.length, 1);
    });

    storeTest(fixture, 'an error outcome fails the message with its error recorded', async (h) => {
      const q = h.queue('error');
      const log = new JobLog();
      h.worker(q, (job) => {
        log.record(job);
        return { status: 'error', error: 'bad input' };
      });
      await h.client.enqueue(q, 'x', { id: 'm' });
      const done = await waitForStatus(h.client, q, 'm', 'failed');
      assert.equal(done.outcome, 'error');
      assert.equal(done.lastError, 'bad input');
      assert.equal(done.attempt, 1);
      assert.equal(log.seen.length, 1);
    });

    storeTest(fixture, 'a handler that throws gives error with lastError set, and no retry', async (h) => {
      const q = h.queue('throws');
      const log = new JobLog();
      h.worker(q, (job) => {
        log.record(job);
        throw new Error('kaboom');
      });
      await h.client.enqueue(q, 'x', { id: 'm' });
      const done = await waitForStatus(h.client, q, 'm', 'failed');
      assert.equal(done.outcome, 'error');
      assert.match(done.lastError ?? '', /kaboom/);
      assert.equal(done.attempt, 1);
      assert.deepEqual(
        log.seen.map((s) => s.attempt),
        [1],
      );
    });

    storeTest(fixture, 'maxAttempts 3: a throwing handler is tried 3 times, then error', async (h) => {
      const q = h.queue('attempts');
      const log = new JobLog();
      const backoffArgs: number[] = [];
      h.worker(
        q,
        (job) => {
          log.record(job);
          throw new Error(`fail on attempt ${job.attempt}`);
        },
        {
          maxAttempts: 3,
          retryBackoffMs: (attempt) => {
            backoffArgs.push(attempt);
            return 50;
          },
        },
      );
      await h.client.enqueue(q, 'x', { id: 'm' });
      const done = await waitForStatus(h.client, q, 'm', 'failed');
      assert.equal(done.outcome, 'error');
      assert.equal(done.attempt, 3);
      assert.match(done.lastError ?? '', /fail on attempt 3/);
      assert.deepEqual(
        log.seen.map((s) => s.attempt),
        [1, 2, 3],
      );
      assert.deepEqual(backoffArgs, [1, 2]);
    });

    storeTest(fixture, 'FIFO: one worker at concurrency 1 handles messages in enqueue order', async (h) => {
      const q = h.queue('fifo');
      const ids = Array.from({ length: 10 }, (_, i) => `m${i}`);
      for (const id of ids.slice(0, 6)) await h.client.enqueue(q, id, { id });
      await h.client.enqueueBatch(
        q,
        ids.slice(6).map((id) => ({ payload: id, id })),
      );
      const log = new JobLog();
      h.worker(q, (job) => log.record(job), { concurrency: 1 });
      await log.count(ids.length);
      assert.deepEqual(log.ids(), ids);
    });

    storeTest(
      fixture,
      'retry without backoff queues the message again; it is handled again with attempt 2',
      async (h) => {
        const q = h.queue('retry');
        const log = new JobLog();
        const queued = await firstAttemptThenStop(h, q, log, { status: 'retry' });
        assert.equal(queued.state, 'queued');
        assert.equal(queued.attempt, 1);
        assert.equal(queued.outcome, 'retry');

        h.worker(q, (job) => log.record(job));
        await log.handled('m', 2);
        const done = await waitForStatus(h.client, q, 'm', 'done-awaiting-gc');
        assert.equal(done.attempt, 2);
        assert.equal(done.outcome, 'success');
      },
    );

    storeTest(
      fixture,
      'retry with backoffMs is queued-with-backoff, then handled with attempt 2 after it',
      async (h) => {
        const q = h.queue('retry-backoff');
        const log = new JobLog();
        const waiting = await firstAttemptThenStop(h, q, log, { status: 'retry', backoffMs: BACKOFF_MS });
        assert.equal(waiting.state, 'queued-with-backoff');
        assert.equal(waiting.outcome, 'retry');
        assert.ok(waiting.until !== null);
        assert.ok(
          Math.abs(waiting.until - (waiting.updatedAt + BACKOFF_MS)) <= CLOCK_SLACK_MS,
          'until = finish + backoff',
        );

        h.worker(q, (job) => log.record(job));
        const second = await log.handled('m', 2);
        assert.ok(second.at >= waiting.until, `handled ${waiting.until - second.at} ms before its backoff ended`);
        assert.equal((await waitForStatus(h.client, q, 'm', 'done-awaiting-gc')).attempt, 2);
      },
    );

    storeTest(
      fixture,
      'initialBackoffMs gives queued-with-backoff, then queued; no worker takes it early',
      async (h) => {
        const q = h.queue('initial');
        await h.client.enqueue(q, 'a', { id: 'a', initialBackoffMs: 600 });
        const waiting = await h.client.status(q, 'a');
        assert.ok(waiting);
        assert.equal(waiting.state, 'queued-with-backoff');
        assert.ok(waiting.until !== null && Math.abs(waiting.until - (waiting.enqueuedAt + 600)) <= CLOCK_SLACK_MS);
        await waitForStatus(h.client, q, 'a', 'queued');
        assert.ok(Date.now() >= waiting.until, 'queued only once the backoff ended');

        const log = new JobLog();
        h.worker(q, (job) => log.record(job));
        await h.client.enqueue(q, 'b', { id: 'b', initialBackoffMs: 600 });
        const b = await h.client.status(q, 'b');
        assert.ok(b?.until != null);
        assert.ok((await log.handled('b')).at >= b.until, 'a worker waited for the initial backoff');
        assert.deepEqual(log.ids(), ['a', 'b']);
      },
    );

    storeTest(
      fixture,
      'success with backoffMs is done-with-backoff: duplicates refused until it ends, then revived',
      async (h) => {
        const q = h.queue('done-backoff');
        const log = new JobLog();
        h.worker(q, (job) => {
          log.record(job);
          return { status: 'success', backoffMs: log.seen.length === 1 ? BACKOFF_MS : 0 };
        });
        await h.client.enqueue(q, 'x', { id: 'm' });
        const blocking = await waitForStatus(h.client, q, 'm', 'done-with-backoff');
        assert.equal(blocking.outcome, 'success');
        assert.ok(
          blocking.until !== null && Math.abs(blocking.until - (blocking.updatedAt + BACKOFF_MS)) <= CLOCK_SLACK_MS,
        );
        assert.deepEqual(await h.client.enqueue(q, 'y', { id: 'm' }), {
          ok: false,
          id: 'm',
          state: 'done-with-backoff',
        });

        await waitForStatus(h.client, q, 'm', 'done-awaiting-gc');
        assert.ok(Date.now() >= blocking.until);
        assert.deepEqual(await h.client.enqueue(q, 'z', { id: 'm' }), { ok: true, id: 'm', action: 'revived' });
        await log.count(2);
        assert.deepEqual(
          log.seen.map((s) => s.attempt),
          [1, 1],
        );
        await waitForStatus(h.client, q, 'm', 'done-awaiting-gc');
      },
    );

    storeTest(fixture, 'error with backoffMs is failed at once: failed refuses its id anyway', async (h) => {
      const q = h.queue('error-backoff');
      h.worker(q, () => ({ status: 'error', error: 'nope', backoffMs: 60_000 }));
      await h.client.enqueue(q, 'x', { id: 'm' });
      const done = await waitForStatus(h.client, q, 'm', 'failed');
      assert.equal(done.outcome, 'error');
      assert.equal(done.lastError, 'nope');
      assert.equal(done.until, null);
      assert.deepEqual(await h.client.enqueue(q, 'y', { id: 'm' }), { ok: false, id: 'm', state: 'failed' });
      assert.deepEqual(await h.client.enqueue(q, 'y', { id: 'm', allowRequeue: true }), {
        ok: false,
        id: 'm',
        state: 'failed',
      });
    });

    storeTest(
      fixture,
      'a done-awaiting-gc message is revived by a new enqueue and handled again with attempt 1',
      async (h) => {
        const q = h.queue('revive');
        const log = new JobLog();
        h.worker(q, (job) => log.record(job));
        await h.client.enqueue(q, 'x', { id: 'm' });
        await waitForStatus(h.client, q, 'm', 'done-awaiting-gc');
        assert.deepEqual(await h.client.enqueue(q, 'x', { id: 'm' }), { ok: true, id: 'm', action: 'revived' });
        await log.count(2);
        assert.deepEqual(
          log.seen.map((s) => `${s.id}#${s.attempt}`),
          ['m#1', 'm#1'],
        );
        const done = await waitForStatus(h.client, q, 'm', 'done-awaiting-gc');
        assert.equal(done.attempt, 1);
        assert.equal((await h.client.queueStatus(q)).total, 1);
      },
    );
  });
}
