/** status() and queueStatus() over every state, and clear(). */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { MESSAGE_STATES, type MessageState } from '../../src/index.js';
import { storeTest } from '../support/harness.js';
import { JobLog, stateOf, waitForStatus } from '../support/jobs.js';
import { gate, waitFor } from '../support/wait.js';
import type { StoreFixture } from '../support/fixture.js';

const LONG_MS = 60_000;

export function status(fixture: StoreFixture): void {
  void describe('status and clear', () => {
    storeTest(fixture, 'status() reports each of the eight states, and null for an unknown id', async (h) => {
      const q = h.queue('states');
      const release = gate();
      const log = new JobLog();
      // Concurrency 2: once it holds two messages, it takes no more, so a third stays queued.
      h.worker(
        q,
        async (job) => {
          log.record(job);
          if (job.id.startsWith('hold')) await release.opened;
          if (job.id === 'done-backoff' || job.id === 'done-requeue') return { status: 'success', backoffMs: LONG_MS };
          if (job.id === 'failed') return { status: 'error', error: 'no good' };
          return { status: 'success' };
        },
        { concurrency: 2, lockMs: 10_000 },
      );
      for (const id of ['done', 'done-backoff', 'done-requeue', 'failed']) await h.client.enqueue(q, id, { id });
      for (const id of ['done', 'done-backoff', 'done-requeue', 'failed'])
        await waitFor(async () => (await h.client.status(q, id))?.outcome);
      await h.client.enqueue(q, 'hold', { id: 'hold' });
      await h.client.enqueue(q, 'hold-requeue', { id: 'hold-requeue' });
      await log.handled('hold');
      await log.handled('hold-requeue');
      await h.client.enqueue(q, 'waiting', { id: 'waiting' });
      await h.client.enqueue(q, 'later', { id: 'later', initialBackoffMs: LONG_MS });
      assert.equal((await h.client.enqueue(q, 'again', { id: 'hold-requeue', allowRequeue: true })).ok, true);
      assert.equal((await h.client.enqueue(q, 'again', { id: 'done-requeue', allowRequeue: true })).ok, true);

      const expected: Record<string, MessageState | null> = {
        waiting: 'queued',
        later: 'queued-with-backoff',
        hold: 'locked',
        'hold-requeue': 'locked-with-requeue',
        done: 'done-awaiting-gc',
        'done-backoff': 'done-with-backoff',
        'done-requeue': 'done-with-requeue',
        failed: 'failed',
        never: null,
      };
      const actual: Record<string, MessageState | null> = {};
      for (const id of Object.keys(expected)) actual[id] = await stateOf(h.client, q, id);
      assert.deepEqual(actual, expected);
      // Every state but a flow's (test/conformance/flows.ts): those a plain message goes through.
      const eight = MESSAGE_STATES.filter((state) => state !== 'waiting-children');
      assert.deepEqual(new Set(Object.values(expected)), new Set([...eight, null]));

      const queueStatus = await h.client.queueStatus(q);
      assert.equal(queueStatus.queue, q);
      assert.deepEqual(queueStatus.counts, {
        ...Object.fromEntries(eight.map((state) => [state, 1])),
        'waiting-children': 0,
      });
      assert.equal(queueStatus.total, 8);
      assert.equal(queueStatus.paused, false);
      release.open();
    });

    storeTest(fixture, 'queueStatus of an unknown queue is empty', async (h) => {
      const status = await h.client.queueStatus(h.queue('nothing'));
      assert.equal(status.total, 0);
      assert.deepEqual(
        Object.values(status.counts),
        MESSAGE_STATES.map(() => 0),
      );
      assert.deepEqual(status.consumers, []);
      assert.equal(status.dryRuns, 0);
    });

    storeTest(
      fixture,
      'clear() removes every message and the dry runs, keeps configuration and other queues',
      async (h) => {
        const q = h.queue('clear');
        const other = h.queue('clear-other');
        const config = await h.client.configure(q, {
          gcLifetimeMs: 12_345,
          gcIntervalMs: 6789,
          filterEnums: { size: ['s', 'm', 'l'] },
        });
        await h.client.enqueue(q, 'done', { id: 'done' });
        const worker = h.worker(q, () => undefined, { eoqBackoffMs: 20 });
        await waitForStatus(h.client, q, 'done', 'done-awaiting-gc');
        // Some dry runs after the handling, so clear() has a count to reset.
        await waitFor(async () => (await h.client.queueStatus(q)).dryRuns >= 1);
        await worker.stop();
        await h.client.enqueue(q, 'a', { id: 'a', filters: { size: 'm' } });
        await h.client.enqueue(q, 'b', { id: 'b', initialBackoffMs: LONG_MS });
        await h.client.enqueue(other, 'keep', { id: 'keep' });

        assert.ok((await h.client.queueStatus(q)).dryRuns >= 1);
        await h.client.clear(q);
        for (const id of ['a', 'b', 'done']) assert.equal(await h.client.status(q, id), null, id);
        const cleared = await h.client.queueStatus(q);
        assert.equal(cleared.total, 0);
        assert.deepEqual(
          Object.values(cleared.counts),
          MESSAGE_STATES.map(() => 0),
        );
        assert.equal(cleared.dryRuns, 0);
        assert.deepEqual(await h.client.config(q), config);
        assert.equal(await stateOf(h.client, other, 'keep'), 'queued');

        // The ids are free again.
        assert.deepEqual(await h.client.enqueue(q, 'a', { id: 'a' }), { ok: true, id: 'a', action: 'added' });
        await h.client.clear(q, other);
        assert.equal(await h.client.status(other, 'keep'), null);
      },
    );
  });
}
