/** A queue's rate limit, kept in the store: at most `max` claimed per `perMs` across every worker and process. */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { storeTest } from '../support/harness.js';
import { JobLog } from '../support/jobs.js';
import { quietPeriod, waitFor } from '../support/wait.js';
import type { Client } from '../../src/index.js';
import type { StoreFixture } from '../support/fixture.js';
import { storeOf } from '../../src/client/client-store.js';

/** A value as a caller without types might pass it. */
const loose = (value: unknown): never => value as never;

// Clocks read in different places (client, store server) on one machine: a small margin, not a speed bound.
const CLOCK_SLACK_MS = 30;

interface ClaimCounter {
  readonly count: () => number;
  /** Date.now() when the first claim was called (before the store read its clock). */
  readonly firstAt: () => number;
}

/** Counts the claims a client's workers make on its store. */
function countClaims(client: Client): ClaimCounter {
  const store = storeOf(client);
  const claim = store.claim.bind(store);
  let calls = 0;
  let firstAt = 0;
  store.claim = (queue, request) => {
    if (calls === 0) firstAt = Date.now();
    calls += 1;
    return claim(queue, request);
  };
  return { count: () => calls, firstAt: () => firstAt };
}

const total = (counters: readonly ClaimCounter[]): number => counters.reduce((sum, c) => sum + c.count(), 0);

/** Waits (a few rounds at most) until the counters stop moving: wake-ups from finished messages were answered. */
async function settled(counters: readonly ClaimCounter[]): Promise<number> {
  let last = total(counters);
  for (let round = 0; round < 5; round += 1) {
    await quietPeriod(300);
    const now = total(counters);
    if (now === last) break;
    last = now;
  }
  return last;
}

export function rateLimit(fixture: StoreFixture): void {
  void describe('rate limit', () => {
    storeTest(
      fixture,
      'within a window workers on two clients get at most max, and wait without polling the store',
      async (h) => {
        const q = h.queue('rate');
        await h.client.configure(q, { rateLimit: { max: 3, perMs: 60_000 } });
        assert.deepEqual((await h.client.config(q)).rateLimit, { max: 3, perMs: 60_000 });
        await h.client.enqueueBatch(
          q,
          Array.from({ length: 10 }, (_, n) => ({ payload: n, id: `m-${n}` })),
        );
        const other = await h.connect();
        const claims = [countClaims(h.client), countClaims(other)];
        const log = new JobLog();
        // A short end-of-queue backoff: a worker that polled on it would claim dozens of times below.
        h.worker(q, (job) => log.record(job), { concurrency: 4, eoqBackoffMs: 20 });
        h.worker(q, (job) => log.record(job), { concurrency: 4, eoqBackoffMs: 20 }, other);
        await log.count(3);
        const before = await settled(claims);
        await quietPeriod(1000);
        assert.equal(log.seen.length, 3, log.ids().join(','));
        const during = total(claims) - before;
        assert.ok(during <= 4, `${during} claims in a second of waiting`);
        assert.equal((await h.client.queueStatus(q)).counts.queued, 7);

        // Without the limit, a new worker takes the rest.
        await h.client.configure(q, { rateLimit: null });
        h.worker(q, (job) => log.record(job), { concurrency: 4 });
        await log.count(10);
        assert.deepEqual(log.ids().sort(), Array.from({ length: 10 }, (_, n) => `m-${n}`).sort());
      },
    );

    storeTest(fixture, 'a limited worker takes the next slot when it comes, no faster', async (h) => {
      const q = h.queue('rate-slots');
      const perMs = 250;
      await h.client.configure(q, { rateLimit: { max: 1, perMs } });
      await h.client.enqueueBatch(
        q,
        [0, 1, 2, 3].map((n) => ({ payload: n, id: `s-${n}` })),
      );
      const claims = countClaims(h.client);
      const log = new JobLog();
      h.worker(q, (job) => log.record(job), { concurrency: 4, eoqBackoffMs: 20 });
      await log.count(4);
      // The n-th message's slot is n windows after the first claim: it cannot start earlier.
      const since = log.seen.map((s) => s.at - claims.firstAt());
      since.forEach((ms, n) => assert.ok(ms >= n * perMs - CLOCK_SLACK_MS, `handled at ${since.join(',')} ms`));
      // One claim per slot, plus wake-ups from the finishes; a polling worker would make dozens.
      assert.ok(claims.count() <= 16, `${claims.count()} claims for 4 slots`);
    });

    storeTest(
      fixture,
      'a worker held back by the limit reports an empty claim with nothing in flight once its results are stored',
      async (h) => {
        // What `kvmq work --idle-exit-ms` waits for: without it the worker would sleep until the next slot (an
        // hour here) with the last report still counting the finished messages as in flight.
        const q = h.queue('rate-idle');
        await h.client.configure(q, { rateLimit: { max: 2, perMs: 3_600_000 } });
        await h.client.enqueueBatch(
          q,
          [0, 1, 2, 3].map((n) => ({ payload: n, id: `i-${n}` })),
        );
        const log = new JobLog();
        let idleReport = false;
        h.worker(q, (job) => log.record(job), {
          concurrency: 4,
          monitor: (info) => {
            if (info.claimed.length === 0 && info.inFlight === 0) idleReport = true;
          },
        });
        await log.count(2);
        await waitFor(() => idleReport);
        assert.equal(log.seen.length, 2);
        assert.equal((await h.client.queueStatus(q)).counts.queued, 2);
      },
    );

    storeTest(
      fixture,
      'a bad rateLimit is a TypeError naming what is allowed; the configuration is unchanged',
      async (h) => {
        const q = h.queue('rate-bad');
        const cases: [unknown, RegExp][] = [
          [{ max: 0, perMs: 1000 }, /rateLimit\.max.*from 1/],
          [{ max: 1.5, perMs: 1000 }, /rateLimit\.max/],
          [{ max: 10, perMs: 0 }, /rateLimit\.perMs/],
          [{ max: 10, perMs: 1000, burst: 5 }, /unknown option 'burst'.*max, perMs/],
          [{ max: 10 }, /perMs/],
          [{ perMs: 1000 }, /max/],
          [100, /rateLimit/],
        ];
        for (const [bad, message] of cases) {
          await assert.rejects(
            h.client.configure(q, { rateLimit: loose(bad) }),
            (error: unknown) => error instanceof TypeError && message.test(error.message),
            JSON.stringify(bad),
          );
        }
        assert.equal((await h.client.config(q)).rateLimit, null);
        assert.deepEqual(await h.client.queues(), []);
      },
    );
  });
}
