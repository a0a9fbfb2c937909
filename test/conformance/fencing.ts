/**
 * Fencing: a worker cut off from its store gives its message up before the store can hand it to another.
 * The cut worker talks through a proxy that blackholes the link (connections stay open, nothing crosses);
 * a second worker talks to the store directly.
 */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { storeTest, type Harness } from '../support/harness.js';
import { JobLog, waitForStatus } from '../support/jobs.js';
import { quietPeriod, untilAborted, waitFor } from '../support/wait.js';
import { slowLink, type SlowLink } from '../support/slow-link.js';
import { connect, type Client, type Worker } from '../../src/index.js';
import type { StoreFixture } from '../support/fixture.js';

const LOCK_MS = 1500;

export function fencing(fixture: StoreFixture): void {
  void describe('fencing', () => {
    storeTest(
      fixture,
      'a prefetched message whose lock ended while the worker was blocked is not started',
      async (h) => {
        const q = h.queue('stale-claim');
        const lockMs = 300;
        await h.client.enqueue(q, 'x', { id: 'a' });
        await h.client.enqueue(q, 'x', { id: 'b' });
        const log = new JobLog();
        const stalled: string[] = [];
        let bothClaimed = false;
        const worker = h.worker(
          q,
          (job) => {
            log.record(job);
            if (job.id !== 'a') return;
            bothClaimed = worker.inFlight === 2;
            // Blocks the event loop past b's lock: nothing renews it, so b's lock ends before b could start.
            const end = Date.now() + 3 * lockMs;
            while (Date.now() < end);
          },
          { concurrency: 1, prefetch: 1, lockMs },
        );
        worker.on('stalled', ({ id, attempt }) => stalled.push(`${id}#${attempt}`));
        await log.handled('b', undefined, { timeoutMs: 10_000 });
        await waitForStatus(h.client, q, 'b', 'done-awaiting-gc');
        assert.equal(bothClaimed, true, 'a and b were claimed together');
        assert.deepEqual(stalled, ['b#1']);
        assert.deepEqual(
          log.seen.map((s) => `${s.id}#${s.attempt}`),
          ['a#1', 'b#2'],
          'b#1 was never started: its lock had ended',
        );
      },
    );
    storeTest(
      fixture,
      'a worker starts the next attempt of a message only once its earlier one returned',
      async (h) => {
        const q = h.queue('one-at-a-time');
        const lockMs = 300;
        await h.client.enqueue(q, 'x', { id: 'm' });
        const log = new JobLog();
        let firstReturnedAt = 0;
        let nextStartedAt = 0;
        let started = 0;
        h.worker(
          q,
          async (job) => {
            log.record(job);
            // The first attempt started here, whatever its number: on a loaded machine attempt 1's claim may
            // arrive after its short lock ended, and is then rightly never started.
            started += 1;
            if (started > 1) {
              nextStartedAt ||= performance.now();
              return;
            }
            // Blocks the event loop past the lock, so the lock ends unrenewed and the message is claimed again,
            // by this worker, while this handler (ignoring its signal) still runs.
            const end = Date.now() + 3 * lockMs;
            while (Date.now() < end);
            await sleep(4 * lockMs);
            firstReturnedAt = performance.now();
          },
          { concurrency: 2, lockMs },
        );
        await waitForStatus(h.client, q, 'm', 'done-awaiting-gc', { timeoutMs: 20_000 });
        assert.ok(
          firstReturnedAt > 0 && nextStartedAt >= firstReturnedAt,
          `the attempts never ran side by side: ${JSON.stringify(log.seen.map((x) => [x.attempt, x.at]))} ${firstReturnedAt} ${nextStartedAt}`,
        );
      },
    );
    if (fixture.overNetwork !== true) return;
    storeTest(
      fixture,
      'a worker whose link is blackholed aborts its handler before another worker starts the message',
      async (h) => {
        const q = h.queue('fencing');
        const { client: cut, link, end } = await behindLink(h, '');
        let abortedAt = 0;
        let reason: unknown = null;
        let returnedAt = 0;
        const stalled: string[] = [];
        const first = new JobLog();
        const cutWorker = cut.worker(
          q,
          async (job) => {
            first.record(job);
            await untilAborted(job.signal);
            abortedAt = performance.now();
            reason = job.signal.reason;
            returnedAt = performance.now();
            return { status: 'error', error: 'the late outcome of a worker that lost its lock' };
          },
          { lockMs: LOCK_MS, eoqBackoffMs: 50, onError: () => undefined },
        );
        cutWorker.on('stalled', ({ id, attempt }) => stalled.push(`${id}#${attempt}`));
        try {
          await h.client.enqueue(q, 'x', { id: 'm' });
          await first.handled('m', 1);

          let secondStartedAt = 0;
          const second = new JobLog();
          h.worker(
            q,
            (job) => {
              secondStartedAt = performance.now();
              second.record(job);
            },
            { lockMs: LOCK_MS },
          );
          link.blackhole();
          const blackholedAt = performance.now();
          await waitFor(() => abortedAt > 0, { what: 'the cut handler to be aborted', timeoutMs: 4 * LOCK_MS });
          // Within a lock and a renewal period of the last renewal (generous: a bound that it happens at all).
          assert.ok(
            abortedAt - blackholedAt < LOCK_MS + LOCK_MS / 3 + 1000,
            `aborted after ${abortedAt - blackholedAt} ms`,
          );
          assert.match((reason as Error).message, /lock lost/);

          await second.handled('m', 2, { timeoutMs: 4 * LOCK_MS + 10_000 });
          assert.ok(secondStartedAt >= abortedAt, 'attempt 2 started only after attempt 1 was told to stop');
          const done = await waitForStatus(h.client, q, 'm', 'done-awaiting-gc');
          assert.equal(done.attempt, 2);
          assert.equal(done.outcome, 'success');

          // The link comes back: renewals held back are answered late; the handler was told once, the late
          // outcome is not stored.
          link.mend();
          await quietPeriod(LOCK_MS);
          assert.ok(returnedAt > 0);
          assert.deepEqual(stalled, ['m#1']);
          assert.deepEqual(first.ids(), ['m']);
          const after = await h.client.status(q, 'm');
          assert.equal(after?.outcome, 'success');
          assert.equal(after.attempt, 2);
        } finally {
          await end(cutWorker);
        }
      },
      { timeoutMs: 60_000 },
    );

    const { shortSession } = fixture;
    if (shortSession === undefined) return;
    storeTest(
      fixture,
      'a session gone silent: the handler is aborted before the server ends the session that holds the claim',
      async (h) => {
        const q = h.queue('silent');
        const { client: cut, link, end } = await behindLink(h, `?${shortSession.option}`);
        const log = new JobLog();
        let abortedAt = 0;
        const cutWorker = cut.worker(
          q,
          async (job) => {
            log.record(job);
            await untilAborted(job.signal);
            abortedAt = performance.now();
          },
          // A lock far longer than the session: only the session's end can take the message away in time.
          { lockMs: 60_000, eoqBackoffMs: 50, onError: () => undefined },
        );
        try {
          await h.client.enqueue(q, 'x', { id: 'm' });
          await log.handled('m', 1);
          let takenAt = 0;
          const takeover = new JobLog();
          h.worker(q, (job) => {
            takenAt = performance.now();
            takeover.record(job);
          });
          link.blackhole();
          const silentAt = performance.now();
          await waitFor(() => abortedAt > 0, {
            what: 'the silent handler to be aborted',
            timeoutMs: 3 * shortSession.ms,
          });
          assert.ok(
            abortedAt - silentAt < shortSession.ms,
            `aborted ${abortedAt - silentAt} ms after the link fell silent`,
          );
          await takeover.handled('m', 2, { timeoutMs: 30_000 });
          assert.ok(takenAt >= abortedAt, 'attempt 2 started only after attempt 1 was told to stop');
        } finally {
          await end(cutWorker);
        }
      },
      { timeoutMs: 60_000 },
    );
  });
}

/**
 * A client of the test's namespace (its URL plus `options`) through a link of its own, which the test blackholes;
 * `end` mends the link, stops the worker and closes both. The client's errors (renewals that failed) are expected.
 */
async function behindLink(
  h: Harness,
  options: string,
): Promise<{ client: Client; link: SlowLink; end: (worker: Worker) => Promise<void> }> {
  const server = new URL(h.url).host;
  const link = await slowLink(server, 0);
  const client = await connect(`${h.url.replace(server, link.address)}${options}`, { onError: () => undefined });
  const end = async (worker: Worker): Promise<void> => {
    link.mend();
    await Promise.all([worker.stop(), worker.stop()]);
    await client.close();
    await link.close();
  };
  return { client, link, end };
}
