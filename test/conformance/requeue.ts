/** allowRequeue: queue an id again while it is locked or in its done backoff. */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { storeTest, type Harness } from '../support/harness.js';
import { JobLog, waitForStatus } from '../support/jobs.js';
import { gate } from '../support/wait.js';
import type { StoreFixture } from '../support/fixture.js';

const BACKOFF_MS = 800;

/** Holds `m` in a handler, requeues it, lets that run finish, then has a new worker handle it again. */
async function requeueWhileLocked(h: Harness, q: string, replacePayload: boolean): Promise<JobLog> {
  const release = gate();
  const log = new JobLog();
  const first = h.worker(q, async (job) => {
    log.record(job);
    await release.opened;
  });
  await h.client.enqueue(q, 'old', { id: 'm' });
  await log.handled('m', 1);

  const requeue = await h.client.enqueue(q, 'new', { id: 'm', allowRequeue: true, replacePayload });
  assert.deepEqual(requeue, { ok: true, id: 'm', action: 'requeued' });
  assert.equal((await h.client.status(q, 'm'))?.state, 'locked-with-requeue');
  assert.deepEqual(await h.client.enqueue(q, 'newer', { id: 'm', allowRequeue: true }), {
    ok: false,
    id: 'm',
    state: 'locked-with-requeue',
  });

  // Stop while the handler runs, so the requeued message waits for us to look at it.
  const stopping = first.stop();
  release.open();
  await stopping;
  assert.equal((await h.client.status(q, 'm'))?.state, 'queued');
  h.worker(q, (job) => log.record(job));
  await log.count(2);
  await waitForStatus(h.client, q, 'm', 'done-awaiting-gc');
  return log;
}

export function requeue(fixture: StoreFixture): void {
  void describe('requeue', () => {
    storeTest(
      fixture,
      'allowRequeue on locked: accepted once, refused the next time, queued again after',
      async (h) => {
        const q = h.queue('rq-locked');
        const log = await requeueWhileLocked(h, q, false);
        const [first, second] = log.seen;
        assert.ok(first && second);
        assert.equal(first.attempt, 1);
        assert.equal(second.attempt, 1, 'a requeued message starts again at attempt 1');
        assert.equal(second.payload, 'old', 'without replacePayload the requeued run keeps the old payload');
        assert.equal(log.seen.length, 2);
      },
    );

    storeTest(fixture, 'replacePayload with allowRequeue: the requeued run sees the new payload', async (h) => {
      const q = h.queue('rq-replace');
      const log = await requeueWhileLocked(h, q, true);
      assert.deepEqual(
        log.seen.map((s) => [s.payload, s.attempt]),
        [
          ['old', 1],
          ['new', 1],
        ],
      );
    });

    storeTest(
      fixture,
      'requeued while locked, a run that ends with a backoff waits it in done-with-requeue, then runs again',
      async (h) => {
        const q = h.queue('rq-locked-backoff');
        const release = gate();
        const log = new JobLog();
        h.worker(q, async (job) => {
          log.record(job);
          if (log.seen.length > 1) return undefined;
          await release.opened;
          return { status: 'success', backoffMs: BACKOFF_MS };
        });
        await h.client.enqueue(q, 'old', { id: 'm' });
        await log.handled('m', 1);
        assert.deepEqual(await h.client.enqueue(q, 'new', { id: 'm', allowRequeue: true }), {
          ok: true,
          id: 'm',
          action: 'requeued',
        });
        release.open();
        await waitForStatus(h.client, q, 'm', 'done-with-requeue');
        await log.count(2);
        assert.deepEqual(
          log.seen.map((s) => s.attempt),
          [1, 1],
          'the requeued run starts again at attempt 1',
        );
      },
    );

    storeTest(fixture, 'allowRequeue on a queued or unknown message changes nothing special', async (h) => {
      const q = h.queue('rq-queued');
      assert.deepEqual(await h.client.enqueue(q, 'a', { id: 'm', allowRequeue: true }), {
        ok: true,
        id: 'm',
        action: 'added',
      });
      assert.deepEqual(await h.client.enqueue(q, 'b', { id: 'm', allowRequeue: true }), {
        ok: false,
        id: 'm',
        state: 'queued',
      });
    });

    storeTest(
      fixture,
      'allowRequeue on done-with-backoff gives done-with-requeue, queued when the backoff ends',
      async (h) => {
        const q = h.queue('rq-done');
        const log = new JobLog();
        const first = h.worker(q, (job) => {
          log.record(job);
          return { status: 'success', backoffMs: BACKOFF_MS };
        });
        await h.client.enqueue(q, 'old', { id: 'm' });
        const blocking = await waitForStatus(h.client, q, 'm', 'done-with-backoff');
        await first.stop();

        assert.deepEqual(await h.client.enqueue(q, 'dup', { id: 'm' }), {
          ok: false,
          id: 'm',
          state: 'done-with-backoff',
        });
        assert.deepEqual(await h.client.enqueue(q, 'new', { id: 'm', allowRequeue: true }), {
          ok: true,
          id: 'm',
          action: 'requeued',
        });
        assert.equal((await h.client.status(q, 'm'))?.state, 'done-with-requeue');
        assert.deepEqual(await h.client.enqueue(q, 'newer', { id: 'm', allowRequeue: true }), {
          ok: false,
          id: 'm',
          state: 'done-with-requeue',
        });

        await waitForStatus(h.client, q, 'm', 'queued');
        assert.ok(blocking.until !== null && Date.now() >= blocking.until, 'queued only once the backoff ended');
        h.worker(q, (job) => log.record(job));
        await log.count(2);
        assert.deepEqual(
          log.seen.map((s) => [s.payload, s.attempt]),
          [
            ['old', 1],
            ['old', 1],
          ],
        );
      },
    );
  });
}
