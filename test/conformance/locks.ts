/**
 * Locks: renewal while a handler runs, expiry when nobody renews, and the
 * stale consumer that comes back. A consumer that stalls is played through
 * the store contract itself (`storeOf(client)`): it claims, then never renews.
 */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { storeTest } from '../support/harness.js';
import { JobLog, waitForStatus } from '../support/jobs.js';
import { gate, quietPeriod, waitFor } from '../support/wait.js';
import type { StoreFixture } from '../support/fixture.js';
import { storeOf } from '../../src/client/client-store.js';

const STALLED = 'stalled-consumer';
// Renewed every 200 ms (a third of it).
const LOCK_MS = 600;

export function locks(fixture: StoreFixture): void {
  void describe('locks', () => {
    storeTest(fixture, 'an expired lock frees the message: handled again with attempt 2', async (h) => {
      const q = h.queue('expiry');
      await h.client.enqueue(q, 'x', { id: 'm' });
      const claim = await storeOf(h.client).claim(q, {
        consumerId: STALLED,
        max: 1,
        lockMs: 300,
        accepts: null,
        eoqBackoffMs: () => 50,
      });
      assert.deepEqual(
        claim.messages.map((m) => [m.id, m.attempt]),
        [['m', 1]],
      );
      const locked = await h.client.status(q, 'm');
      assert.equal(locked?.state, 'locked');
      assert.equal(locked.consumer, STALLED);

      // Nobody renews: once the lock ends the message is queued again, as Carmine derives it.
      const freed = await waitForStatus(h.client, q, 'm', 'queued');
      assert.ok(locked.until !== null && Date.now() >= locked.until);
      assert.equal(freed.consumer, null);

      const release = gate();
      const log = new JobLog();
      const worker = h.worker(q, async (job) => {
        log.record(job);
        await release.opened;
      });
      assert.equal((await log.handled('m')).attempt, 2);

      // The stalled consumer comes back: it can neither renew nor finish what it lost.
      assert.deepEqual(await storeOf(h.client).extend(q, STALLED, [{ id: 'm', attempt: 1 }], 300), ['m']);
      const late = { id: 'm', attempt: 1, outcome: 'error' as const, backoffMs: 0, error: 'late', startedAt: null };
      assert.deepEqual(await storeOf(h.client).finish(q, STALLED, [late]), ['lost']);
      const held = await h.client.status(q, 'm');
      assert.equal(held?.state, 'locked');
      assert.equal(held.consumer, worker.id);
      assert.equal(held.attempt, 2);

      release.open();
      const done = await waitForStatus(h.client, q, 'm', 'done-awaiting-gc');
      assert.equal(done.outcome, 'success');
      assert.equal(done.lastError, null);
      assert.deepEqual(await storeOf(h.client).finish(q, STALLED, [late]), ['lost']);
      assert.equal((await h.client.status(q, 'm'))?.outcome, 'success');
    });

    storeTest(fixture, 'a worker renews its lock while a handler runs past lockMs', async (h) => {
      const q = h.queue('renew');
      // Long enough that a renewal slowed by a loaded machine still lands before the worker's fence.
      const lockMs = 1000;
      const release = gate();
      const log = new JobLog();
      const holder = h.worker(
        q,
        async (job) => {
          log.record(job);
          await release.opened;
        },
        { lockMs },
      );
      await h.client.enqueue(q, 'x', { id: 'm' });
      const first = await log.handled('m');
      // A second worker would take the message (attempt 2) if the first lock lapsed.
      h.worker(q, (job) => log.record(job), { lockMs, eoqBackoffMs: 20 });
      await waitFor(() => Date.now() >= first.at + 4 * lockMs, { what: 'four lock periods to pass' });
      const status = await h.client.status(q, 'm');
      assert.equal(status?.state, 'locked');
      assert.equal(status.consumer, holder.id);
      assert.equal(status.attempt, 1);
      assert.deepEqual(log.ids(), ['m']);
      release.open();
      assert.equal((await waitForStatus(h.client, q, 'm', 'done-awaiting-gc')).attempt, 1);
    });

    storeTest(
      fixture,
      'claimWithFinishes: a claim sent right behind a retry, unawaited, takes the message it put back',
      async (h) => {
        // The worker sends its next claim with its finishes only where this holds (worker.ts freeSlots).
        if (!storeOf(h.client).capabilities.claimWithFinishes) return;
        const q = h.queue('claim-behind-finish');
        await h.client.enqueue(q, 'x', { id: 'first' });
        const request = { consumerId: STALLED, max: 1, lockMs: 30_000, accepts: null, eoqBackoffMs: () => 50 };
        const [taken] = (await storeOf(h.client).claim(q, request)).messages;
        assert.equal(taken?.id, 'first');
        const retry = {
          id: 'first',
          attempt: 1,
          outcome: 'retry',
          backoffMs: 0,
          error: 'again',
          startedAt: 1,
        } as const;
        // Not awaited before the claim: both leave in the same tick, as a worker's do.
        const finishing = storeOf(h.client).finish(q, STALLED, [retry]);
        const claiming = storeOf(h.client).claim(q, request);
        assert.deepEqual(await finishing, ['ok']);
        assert.deepEqual(
          (await claiming).messages.map((m) => [m.id, m.attempt]),
          [['first', 2]],
        );
      },
    );

    storeTest(fixture, 'a handler whose message is taken away (cleared) sees job.signal aborted', async (h) => {
      const q = h.queue('lost');
      const log = new JobLog();
      const worker = h.worker(
        q,
        async (job) => {
          await log.recordUntilAborted(job);
          return { status: 'error', error: 'should not be recorded' };
        },
        { lockMs: 1000 },
      );
      await h.client.enqueue(q, 'x', { id: 'm' });
      const seen = await log.handled('m');
      assert.equal(seen.job.signal.aborted, false);
      await h.client.clear(q);
      await waitFor(() => seen.job.signal.aborted, { what: 'the abort signal' });
      await waitFor(() => worker.inFlight === 0, { what: 'the handler to end' });
      // The worker records nothing for a message it lost.
      assert.equal(await h.client.status(q, 'm'), null);
      assert.equal((await h.client.queueStatus(q)).total, 0);
    });

    storeTest(fixture, 'a renewal answered after its attempt ended never takes the next attempt away', async (h) => {
      const q = h.queue('renew-race');
      const store = storeOf(h.client);
      const extend = store.extend.bind(store);
      const renewingFirst = gate();
      const secondRuns = gate();
      // The renewal sent for attempt 1 reaches the store only once attempt 2 runs, so the store answers that
      // attempt 1 is no longer held: that answer speaks of attempt 1 alone.
      store.extend = async (queue, consumerId, held, lockMs) => {
        if (held.some((m) => m.id === 'm' && m.attempt === 1)) {
          renewingFirst.open();
          await secondRuns.opened;
        }
        return extend(queue, consumerId, held, lockMs);
      };
      const stalled: number[] = [];
      const aborted: boolean[] = [];
      const worker = h.worker(
        q,
        async (job) => {
          if (job.attempt === 1) {
            await renewingFirst.opened;
            return { status: 'retry', backoffMs: 0 };
          }
          secondRuns.open();
          // Past the late answer, and a renewal or two of this attempt's own.
          await quietPeriod(LOCK_MS);
          aborted.push(job.signal.aborted);
          return { status: 'success' };
        },
        { lockMs: LOCK_MS },
      );
      worker.on('stalled', (e) => stalled.push(e.attempt));
      await h.client.enqueue(q, 'x', { id: 'm' });
      const done = await waitForStatus(h.client, q, 'm', 'done-awaiting-gc');
      assert.equal(done.attempt, 2);
      assert.deepEqual(aborted, [false]);
      assert.deepEqual(stalled, []);
    });
  });
}
