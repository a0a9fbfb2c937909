/**
 * A message's time to live (`expireAfterMs`): one not started in time fails with the error `expired`, whether a
 * worker claims it (its handler is never called) or the queue's GC finds it waiting; one started in time runs.
 */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { storeTest } from '../support/harness.js';
import { JobLog, waitForStatus } from '../support/jobs.js';
import { waitFor } from '../support/wait.js';
import type { StoreFixture } from '../support/fixture.js';
import { storeOf } from '../../src/client/client-store.js';

const TTL_MS = 50;
const LONG_MS = 60_000;
const HOUR_MS = 3_600_000;

export function expiry(fixture: StoreFixture): void {
  void describe('time to live', () => {
    storeTest(fixture, 'a message claimed past its time to live fails as expired, unrun', async (h) => {
      const q = h.queue('ttl-claim');
      await h.client.configure(q, { events: true, gcIntervalMs: HOUR_MS });
      const started = Date.now();
      // A GC now, before the deadline, so the next is an hour away: the worker's claim meets the expired message.
      await h.client.gc(q);
      await h.client.enqueue(q, 'stale', { id: 'stale', expireAfterMs: TTL_MS });
      await h.client.enqueue(q, 'fresh', { id: 'fresh', expireAfterMs: LONG_MS });
      await h.client.enqueue(q, 'plain', { id: 'plain' });
      await sleep(TTL_MS * 3);
      const log = new JobLog();
      const reasons: string[] = [];
      const worker = h.worker(q, (job) => log.record(job));
      worker.on('failed', (event) => reasons.push(`${event.id}:${event.reason}`));

      const failed = await waitForStatus(h.client, q, 'stale', 'failed');
      assert.equal(failed.lastError, 'expired');
      assert.equal(failed.outcome, 'error');
      await log.handled('fresh');
      await log.handled('plain');
      await waitForStatus(h.client, q, 'fresh', 'done-awaiting-gc');
      assert.deepEqual(log.of('stale'), [], 'the handler never saw the expired message');
      await waitFor(() => reasons.length > 0, { what: 'the worker to tell of the failure' });
      assert.deepEqual(reasons, ['stale:expired']);

      const details = await h.client.show(q, 'stale');
      const expireAt = details?.policy.expireAt ?? 0;
      assert.ok(expireAt >= started + TTL_MS && expireAt <= Date.now(), 'the deadline is kept in its policy');
      assert.equal((await h.client.show(q, 'plain'))?.policy.expireAt, undefined, 'none without a time to live');
      assert.equal((await h.client.queueStatus(q)).counts.failed, 1, 'counted as a failure');
      const events = (await h.client.readEvents(q, { limit: 100 })).events;
      assert.ok(
        events.some((e) => e.id === 'stale' && e.type === 'failed' && e.error === 'expired'),
        `a failed event says why: ${JSON.stringify(events)}`,
      );
    });

    storeTest(fixture, 'the GC fails waiting messages past their time to live, with no worker', async (h) => {
      const q = h.queue('ttl-gc');
      await h.client.configure(q, { events: true });
      await h.client.enqueue(q, 'a', { id: 'now', expireAfterMs: TTL_MS });
      await h.client.enqueue(q, 'b', { id: 'later', expireAfterMs: TTL_MS * 2, initialBackoffMs: TTL_MS });
      await h.client.enqueue(q, 'c', { id: 'kept', expireAfterMs: LONG_MS });
      await h.client.enqueue(q, 'd', { id: 'plain' });
      await sleep(TTL_MS * 4);
      await h.client.gc(q);

      for (const id of ['now', 'later']) {
        const status = await h.client.status(q, id);
        assert.equal(status?.state, 'failed', `${id} expired`);
        assert.equal(status.lastError, 'expired');
      }
      assert.equal((await h.client.status(q, 'kept'))?.state, 'queued');
      assert.equal((await h.client.status(q, 'plain'))?.state, 'queued');
      const status = await h.client.queueStatus(q);
      assert.equal(status.counts.failed, 2);
      assert.equal(status.counts.queued, 2);
      const events = (await h.client.readEvents(q, { limit: 100 })).events;
      assert.deepEqual(
        events.filter((e) => e.type === 'failed').map((e) => [e.id, e.error]),
        [
          ['now', 'expired'],
          ['later', 'expired'],
        ],
      );
      // Later GCs find nothing more to fail.
      await h.client.gc(q);
      assert.equal((await h.client.queueStatus(q)).counts.failed, 2);
      // A worker that starts now runs the others, never the expired ones.
      const log = new JobLog();
      h.worker(q, (job) => log.record(job));
      await log.handled('kept');
      await log.handled('plain');
      await waitForStatus(h.client, q, 'plain', 'done-awaiting-gc');
      assert.deepEqual(log.ids().sort(), ['kept', 'plain']);
    });

    storeTest(
      fixture,
      "a flow's parent past its time to live while its children run expires once it is queued, unrun",
      async (h) => {
        const q = h.queue('ttl-parent');
        const kids = h.queue('ttl-kids');
        await h.client.flow({
          queue: q,
          payload: 'p',
          id: 'p',
          expireAfterMs: TTL_MS,
          children: [{ queue: kids, payload: 'c', id: 'c' }],
        });
        await sleep(TTL_MS * 3);
        // Waiting for its child, it is not expired: it has not been queued yet.
        await h.client.gc(q);
        assert.equal((await h.client.status(q, 'p'))?.state, 'waiting-children');
        const worker = h.worker(kids, () => undefined);
        await waitForStatus(h.client, kids, 'c', 'done-awaiting-gc');
        await worker.stop();
        assert.equal((await h.client.status(q, 'p'))?.state, 'queued');
        await h.client.gc(q);
        const status = await h.client.status(q, 'p');
        assert.equal(status?.state, 'failed', 'queued past its deadline, it expires');
        assert.equal(status.lastError, 'expired');
      },
      { capability: 'flows' },
    );

    storeTest(fixture, 'an expired message moves to the dead-letter queue', async (h) => {
      const q = h.queue('ttl-dlq-source');
      const dlq = h.queue('ttl-dlq');
      if (!storeOf(h.client).capabilities.deadLetterQueue) return;
      await h.client.configure(q, { deadLetterQueue: dlq });
      await h.client.enqueue(q, { n: 1 }, { id: 'swept', expireAfterMs: TTL_MS });
      await sleep(TTL_MS * 3);
      await h.client.gc(q);
      const swept = await waitForStatus(h.client, dlq, 'swept', 'queued');
      assert.equal(swept.lastError, 'expired');
      assert.equal(await h.client.status(q, 'swept'), null);
    });

    storeTest(fixture, 'a time to live that is not a positive whole number of ms is a TypeError', async (h) => {
      const q = h.queue('ttl-bad');
      for (const bad of [0, -5, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '5s', null]) {
        await assert.rejects(
          h.client.enqueue(q, 'x', { expireAfterMs: bad as number }),
          (error: unknown) => error instanceof TypeError && /expireAfterMs/.test(error.message),
          `expireAfterMs ${String(bad)}`,
        );
      }
      await assert.rejects(
        h.client.enqueue(q, 'x', { expireAfterMs: 100, initialBackoffMs: 100 }),
        /expireAfterMs \(100\) must be longer than the message's delay/,
      );
      await assert.rejects(
        h.client.enqueue(q, 'x', { expireAfterMs: 1000, runAt: Date.now() + LONG_MS }),
        /expireAfterMs \(1000\) must be longer/,
      );
      assert.equal((await h.client.queueStatus(q)).total, 0, 'nothing was written');
    });
  });
}
