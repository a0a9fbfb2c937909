/**
 * client.cancel: a waiting, delayed or running message fails at once with `canceled`; a running handler's
 * job.signal is aborted by the store's own notification (not a renewal: the locks here outlast the test), and
 * what it then returns is not stored; unknown and finished messages are refused, nothing changed.
 */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { storeTest } from '../support/harness.js';
import { waitForStatus } from '../support/jobs.js';
import { gate, quietPeriod, untilAborted, waitFor, within } from '../support/wait.js';
import type { StoreFixture } from '../support/fixture.js';
import { CanceledError, MessageGoneError } from '../../src/model/errors.js';
import type { FailedEvent } from '../../src/worker/events.js';

// Renewals come every third of this: far later than any test waits for a cancel to arrive.
const LONG_LOCK_MS = 90_000;

export function cancel(fixture: StoreFixture): void {
  void describe('cancel', () => {
    storeTest(fixture, 'a waiting message fails at once, with the reason, counted and told as failed', async (h) => {
      const q = h.queue('cancel-waiting');
      await h.client.configure(q, { events: true });
      await h.client.enqueue(q, 'w', { id: 'w' });
      const result = await h.client.cancel(q, 'w', 'no longer wanted');
      assert.deepEqual(result, { ok: true, id: 'w', state: 'failed' });
      const status = await h.client.status(q, 'w');
      assert.equal(status?.state, 'failed');
      assert.equal(status.outcome, 'error');
      assert.equal(status.lastError, 'canceled: no longer wanted');
      assert.equal((await h.client.queueStatus(q)).counts.failed, 1);
      const page = await h.client.readEvents(q);
      assert.deepEqual(
        page.events.map((e) => [e.type, e.id]),
        [
          ['enqueued', 'w'],
          ['failed', 'w'],
        ],
      );
      // A worker started afterwards never runs it.
      let ran = 0;
      h.worker(q, () => void (ran += 1));
      await h.client.enqueue(q, 'after', { id: 'after' });
      await waitForStatus(h.client, q, 'after', 'done-awaiting-gc');
      assert.equal(ran, 1);
      assert.equal((await h.client.status(q, 'w'))?.state, 'failed');
    });

    storeTest(
      fixture,
      'a delayed message fails at once, `canceled` without a reason (through the typed queue)',
      async (h) => {
        const q = h.queue('cancel-delayed');
        await h.client.enqueue(q, 'd', { id: 'd', initialBackoffMs: 60_000 });
        assert.equal((await h.client.status(q, 'd'))?.state, 'queued-with-backoff');
        // Through the typed queue, which cancels as the client does.
        assert.deepEqual(await h.client.queue<number>(q).cancel('d'), { ok: true, id: 'd', state: 'failed' });
        const status = await h.client.status(q, 'd');
        assert.equal(status?.state, 'failed');
        assert.equal(status.lastError, 'canceled');
      },
    );

    storeTest(fixture, "a running handler's signal is aborted promptly, and its success is not stored", async (h) => {
      const q = h.queue('cancel-running');
      const started = gate();
      const returned = gate();
      let reason: unknown = null;
      const failed: FailedEvent[] = [];
      const worker = h.worker(
        q,
        async (job) => {
          started.open();
          await untilAborted(job.signal);
          reason = job.signal.reason;
          returned.open();
          return { status: 'success', result: 'too late' };
        },
        { lockMs: LONG_LOCK_MS },
      );
      worker.on('failed', (event) => failed.push(event));
      await h.client.enqueue(q, 'r', { id: 'r' });
      await within(10_000, started.opened, 'the handler starting');
      assert.equal((await h.client.status(q, 'r'))?.state, 'locked');
      // From a second client, with connections of its own: the holder hears of it through the store's server.
      const other = await h.connect();
      assert.deepEqual(await other.cancel(q, 'r', 'stop it'), { ok: true, id: 'r', state: 'failed' });
      // Far sooner than a renewal (a third of the lock) could tell it.
      await within(10_000, returned.opened, 'the signal aborting');
      assert.ok(reason instanceof CanceledError, `the reason is a CanceledError, not ${String(reason)}`);
      assert.equal(reason.id, 'r');
      assert.deepEqual(
        failed.map((e) => [e.id, e.reason]),
        [['r', 'canceled']],
      );
      // The handler's success, had it been sent, would be refused; it stays failed.
      await quietPeriod();
      const status = await h.client.status(q, 'r');
      assert.equal(status?.state, 'failed');
      assert.equal(status.lastError, 'canceled: stop it');
      assert.equal(status.result, undefined);
      assert.equal((await h.client.queueStatus(q)).counts.failed, 1);
      const details = await h.client.show(q, 'r');
      assert.deepEqual(
        details?.history.map((r) => [r.attempt, r.outcome, r.consumer, r.error]),
        [[1, 'error', worker.id, 'canceled: stop it']],
      );
    });

    storeTest(fixture, 'an unknown id is MESSAGE_GONE; a finished message is refused with its state', async (h) => {
      const q = h.queue('cancel-refused');
      await assert.rejects(h.client.cancel(q, 'nobody'), MessageGoneError);
      h.worker(q, (job) => (job.id === 'bad' ? { status: 'error', error: 'broken' } : undefined));
      await h.client.enqueue(q, 'ok', { id: 'ok' });
      await h.client.enqueue(q, 'bad', { id: 'bad' });
      await waitForStatus(h.client, q, 'ok', 'done-awaiting-gc');
      await waitForStatus(h.client, q, 'bad', 'failed');
      assert.deepEqual(await h.client.cancel(q, 'ok'), { ok: false, id: 'ok', state: 'done-awaiting-gc' });
      assert.deepEqual(await h.client.cancel(q, 'bad'), { ok: false, id: 'bad', state: 'failed' });
      assert.equal((await h.client.status(q, 'ok'))?.lastError, null, 'nothing changed');
      assert.equal((await h.client.status(q, 'bad'))?.lastError, 'broken', 'nothing changed');
      await assert.rejects(h.client.cancel(q, 'ok', 42 as unknown as string), TypeError);
    });

    storeTest(
      fixture,
      'a canceled message goes to the dead-letter queue as a final failure does',
      async (h) => {
        const q = h.queue('cancel-dlq');
        const dlq = h.queue('cancel-dlq-dead');
        await h.client.configure(q, { deadLetterQueue: dlq });
        await h.client.enqueue(q, 'x', { id: 'x' });
        assert.deepEqual(await h.client.cancel(q, 'x', 'moved'), { ok: true, id: 'x', state: null });
        assert.equal(await h.client.status(q, 'x'), null);
        const moved = await h.client.status(dlq, 'x');
        assert.equal(moved?.state, 'queued');
        assert.equal(moved.lastError, 'canceled: moved');
      },
      { capability: 'deadLetterQueue' },
    );

    storeTest(
      fixture,
      'a canceled message whose id the dead-letter queue holds fails in its own queue, as a failure does',
      async (h) => {
        const q = h.queue('cancel-clash');
        const dlq = h.queue('cancel-clash-dead');
        await h.client.configure(q, { deadLetterQueue: dlq });
        await h.client.enqueue(dlq, 'there first', { id: 'x' });
        await h.client.enqueue(q, 'here', { id: 'x' });
        assert.deepEqual(await h.client.cancel(q, 'x', 'clash'), { ok: true, id: 'x', state: 'failed' });
        const status = await h.client.status(q, 'x');
        assert.equal(status?.state, 'failed');
        assert.equal(status.lastError, 'canceled: clash');
        assert.equal((await h.client.queueStatus(q)).counts.failed, 1);
        const other = await h.client.show(dlq, 'x');
        assert.deepEqual([other?.state, other?.payload, other?.lastError], ['queued', 'there first', null]);
      },
      { capability: 'deadLetterQueue' },
    );

    storeTest(
      fixture,
      'a cancel racing claims: each message either never runs or has its signal aborted',
      async (h) => {
        const q = h.queue('cancel-race');
        const ids = Array.from({ length: 20 }, (_, i) => `m${i}`);
        for (const id of ids) await h.client.enqueue(q, id, { id });
        const ran = new Set<string>();
        const aborted = new Set<string>();
        h.worker(
          q,
          async (job) => {
            ran.add(job.id);
            await Promise.race([untilAborted(job.signal), new Promise((resolve) => setTimeout(resolve, 5000))]);
            if (job.signal.aborted) aborted.add(job.id);
            return undefined;
          },
          { lockMs: LONG_LOCK_MS, concurrency: 5 },
        );
        await waitFor(() => ran.size > 0, { what: 'a first claim' });
        const results = await Promise.all(ids.map((id) => h.client.cancel(q, id)));
        for (const result of results) {
          // A message done before its cancel arrived is refused; every other one is canceled.
          if (!result.ok) assert.equal(result.state, 'done-awaiting-gc', result.id);
        }
        const canceled = results.filter((r) => r.ok).map((r) => r.id);
        assert.ok(canceled.length >= 15, `most messages were canceled (${canceled.length})`);
        await waitFor(() => canceled.every((id) => !ran.has(id) || aborted.has(id)), {
          timeoutMs: 10_000,
          what: () =>
            `every canceled message that ran to be aborted (${[...ran].filter((id) => !aborted.has(id)).join()})`,
        });
        for (const id of canceled) assert.equal((await h.client.status(q, id))?.state, 'failed', id);
      },
    );
  });
}
