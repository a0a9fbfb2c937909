/** The queue-wide end-of-queue backoff and its dry-run count (Carmine's eoq-backoff and ndry-runs). */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { storeTest } from '../support/harness.js';
import { JobLog } from '../support/jobs.js';
import { gate, waitFor } from '../support/wait.js';
import type { MonitorInfo } from '../../src/index.js';
import type { StoreFixture } from '../support/fixture.js';

/** True when the numbers never go down. */
function nonDecreasing(values: readonly number[]): boolean {
  return values.every((v, i) => i === 0 || v >= (values[i - 1] ?? v));
}

export function backoff(fixture: StoreFixture): void {
  void describe('end-of-queue backoff and dry runs', () => {
    storeTest(fixture, 'an idle worker counts dry runs, shown by queueStatus and the monitor', async (h) => {
      const q = h.queue('dry');
      const seen: MonitorInfo[] = [];
      const backoffArgs: number[] = [];
      h.worker(q, () => undefined, {
        eoqBackoffMs: (n) => {
          backoffArgs.push(n);
          return 20;
        },
        monitor: (info) => seen.push(info),
      });
      await waitFor(async () => (await h.client.queueStatus(q)).dryRuns >= 6, { what: '6 dry runs' });
      const dryRuns = seen.map((info) => info.dryRuns);
      assert.ok(nonDecreasing(dryRuns), `dry runs went down: ${dryRuns.join(',')}`);
      assert.ok(dryRuns.includes(1) && dryRuns.includes(2), `monitor saw ${dryRuns.join(',')}`);
      assert.ok(seen.every((info) => info.queue === q && info.claimed.length === 0 && info.queueSize === 0));
      // Carmine's eoq[min(5, ndry + 1)]: the function is asked for dry runs 0..4, never beyond, starting at 0.
      // (A store may ask for all five at once, as Carmine's client does, so the order is not checked.)
      assert.equal(backoffArgs[0], 0);
      assert.deepEqual(
        [...new Set(backoffArgs)].sort(),
        [0, 1, 2, 3, 4],
        `backoff function saw ${backoffArgs.join(',')}`,
      );
    });

    storeTest(fixture, 'skipped messages leave dry runs counting; handling one resets them to 0', async (h) => {
      const q = h.queue('dry-skip');
      await h.client.enqueue(q, 'later', { id: 'later', initialBackoffMs: 60_000 });
      const seen: MonitorInfo[] = [];
      const release = gate();
      const log = new JobLog();
      h.worker(
        q,
        async (job) => {
          log.record(job);
          await release.opened;
        },
        { eoqBackoffMs: 20, monitor: (info) => seen.push(info) },
      );
      await waitFor(async () => (await h.client.queueStatus(q)).dryRuns >= 3, { what: '3 dry runs past a backoff' });
      assert.ok(nonDecreasing(seen.map((info) => info.dryRuns)));
      assert.equal(log.seen.length, 0);

      await h.client.enqueue(q, 'now', { id: 'now' });
      await log.handled('now');
      const claimedPoll = seen.find((info) => info.claimed.includes('now'));
      assert.equal(claimedPoll?.dryRuns, 0, 'the poll that claimed a message reports 0 dry runs');
      // The worker (concurrency 1) is busy, so nothing counts a dry run until we release it.
      assert.equal((await h.client.queueStatus(q)).dryRuns, 0);
      release.open();
    });

    storeTest(
      fixture,
      'the end-of-queue backoff is queue-wide: another worker counts no dry run while it lasts',
      async (h) => {
        const q = h.queue('dry-wide');
        const first: MonitorInfo[] = [];
        const second: MonitorInfo[] = [];
        h.worker(q, () => undefined, { eoqBackoffMs: 60_000, monitor: (info) => first.push(info) });
        await waitFor(() => first.some((info) => info.dryRuns === 1), { what: 'the first dry run' });
        h.worker(q, () => undefined, { eoqBackoffMs: 10, monitor: (info) => second.push(info) });
        await waitFor(() => second.length >= 1, { what: 'the second worker to poll' });
        assert.deepEqual(
          second.map((info) => info.dryRuns),
          second.map(() => 1),
        );
        assert.equal((await h.client.queueStatus(q)).dryRuns, 1);
      },
    );

    storeTest(fixture, 'the monitor reports queue size and claimed ids', async (h) => {
      const q = h.queue('monitor');
      await h.client.enqueueBatch(q, [
        { payload: 1, id: 'a' },
        { payload: 2, id: 'b' },
        { payload: 3, id: 'c' },
      ]);
      const seen: MonitorInfo[] = [];
      const release = gate();
      const worker = h.worker(
        q,
        async () => {
          await release.opened;
        },
        { concurrency: 2, monitor: (info) => seen.push(info) },
      );
      await waitFor(() => worker.inFlight === 2, { what: 'two messages in flight' });
      // A store may hand over fewer than asked per poll, so look at every poll that claimed.
      const claims = seen.filter((info) => info.claimed.length > 0);
      assert.deepEqual(claims.flatMap((info) => info.claimed).sort(), ['a', 'b']);
      assert.ok(
        claims.every((info) => info.queueSize === 3),
        `queue sizes: ${claims.map((i) => i.queueSize).join(',')}`,
      );
      release.open();
      await waitFor(() => seen.some((info) => info.claimed.length === 0 && info.queueSize === 0), {
        what: () => `an empty poll (seen ${JSON.stringify(seen)})`,
      });
      assert.deepEqual(seen.flatMap((info) => info.claimed).sort(), ['a', 'b', 'c']);
    });
  });
}
