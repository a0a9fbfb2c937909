/** Group concurrency: at most `groupConcurrency` messages of one group held at once, across every worker. */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { claimIds, finishOk } from '../support/claims.js';
import { storeTest } from '../support/harness.js';
import { JobLog, stateOf } from '../support/jobs.js';
import { gate, quietPeriod, waitFor } from '../support/wait.js';
import type { Job, MonitorInfo } from '../../src/index.js';
import type { StoreFixture } from '../support/fixture.js';

/** A value as a caller without types might pass it. */
const loose = (value: unknown): never => value as never;

/** Counts handlers running per group, and the most ever running at once. */
class GroupGauge {
  readonly running = new Map<string, number>();
  readonly most = new Map<string, number>();

  enter(group: string): void {
    const now = (this.running.get(group) ?? 0) + 1;
    this.running.set(group, now);
    this.most.set(group, Math.max(now, this.most.get(group) ?? 0));
  }

  leave(group: string): void {
    this.running.set(group, (this.running.get(group) ?? 0) - 1);
  }
}

const groupOf = (job: Job): string => (job.payload as { group: string }).group;

export function groups(fixture: StoreFixture): void {
  void describe('group concurrency', () => {
    storeTest(
      fixture,
      'at most groupConcurrency messages of a group are held across workers; other groups keep flowing',
      async (h) => {
        const q = h.queue('groups');
        await h.client.configure(q, { groupConcurrency: 2 });
        // The slow group first, so a claim must skip past it to find the others.
        const items = [
          ...[1, 2, 3, 4, 5].map((n) => ({ payload: { group: 'slow' }, id: `slow-${n}`, group: 'slow' })),
          ...[1, 2, 3].map((n) => ({ payload: { group: 'fast' }, id: `fast-${n}`, group: 'fast' })),
          ...[1, 2].map((n) => ({ payload: { group: 'none' }, id: `plain-${n}` })),
        ];
        await h.client.enqueueBatch(q, items);
        const gauge = new GroupGauge();
        const release = gate();
        const log = new JobLog();
        const handler = async (job: Job): Promise<void> => {
          const group = groupOf(job);
          gauge.enter(group);
          log.record(job);
          try {
            if (group === 'slow') await release.opened;
          } finally {
            gauge.leave(group);
          }
        };
        const other = await h.connect();
        h.worker(q, handler, { concurrency: 3 });
        h.worker(q, handler, { concurrency: 3 }, other);

        // Everything but the slow group is handled while two slow ones are held.
        for (const id of ['fast-1', 'fast-2', 'fast-3', 'plain-1', 'plain-2']) await log.handled(id);
        await waitFor(() => gauge.running.get('slow') === 2, { what: 'two slow messages held' });
        await quietPeriod();
        assert.equal(gauge.running.get('slow'), 2);
        assert.equal(gauge.most.get('slow'), 2);
        const queued = await Promise.all([1, 2, 3, 4, 5].map((n) => stateOf(h.client, q, `slow-${n}`)));
        assert.equal(queued.filter((state) => state === 'queued').length, 3, queued.join(','));

        release.open();
        await log.count(items.length);
        assert.equal(gauge.most.get('slow'), 2);
        assert.deepEqual(log.ids().sort(), items.map((item) => item.id).sort());
      },
    );

    storeTest(
      fixture,
      'a freed group slot is taken by an idle worker at once, not at a lock expiry',
      async (h) => {
        const q = h.queue('group-freed');
        await h.client.configure(q, { groupConcurrency: 1 });
        await h.client.enqueue(q, 'first', { id: 'g-1', group: 'g' });
        await h.client.enqueue(q, 'second', { id: 'g-2', group: 'g' });
        const holder = 'holder-consumer';
        assert.deepEqual((await claimIds(h, q, holder, 5)).ids, ['g-1']);

        const log = new JobLog();
        const polls: MonitorInfo[] = [];
        // Neither a lock expiry (60 s) nor an end-of-queue backoff (60 s) comes within the test.
        h.worker(q, (job) => log.record(job), { eoqBackoffMs: 60_000, monitor: (info) => polls.push(info) });
        await waitFor(() => polls.some((info) => info.claimed.length === 0), { what: 'a poll that found g full' });
        assert.equal(await stateOf(h.client, q, 'g-2'), 'queued');

        await finishOk(h, q, holder, 'g-1');
        await log.handled('g-2');
        assert.deepEqual(log.ids(), ['g-2']);
      },
      { capability: 'wakeups' },
    );

    storeTest(fixture, 'without a group limit, grouped messages behind plain ones reach a busy worker', async (h) => {
      const q = h.queue('group-unlimited');
      await h.client.enqueueBatch(q, [
        { payload: 1, id: 'plain' },
        { payload: 2, id: 'g-1', group: 'g' },
        { payload: 3, id: 'g-2', group: 'g' },
      ]);
      // One at a time: the worker's room comes back by finishing, not by a claim of an idle worker.
      const log = new JobLog();
      h.worker(q, (job) => log.record(job), { concurrency: 1 });
      await log.count(3);
      assert.deepEqual(log.ids(), ['plain', 'g-1', 'g-2']);
    });

    storeTest(fixture, 'changing groupConcurrency takes effect at the next claim', async (h) => {
      const q = h.queue('group-change');
      await h.client.configure(q, { groupConcurrency: 1 });
      await h.client.enqueueBatch(
        q,
        [1, 2, 3, 4].map((n) => ({ payload: n, id: `m-${n}`, group: 'g' })),
      );
      assert.deepEqual((await claimIds(h, q, 'c1', 4)).ids, ['m-1']);
      assert.deepEqual((await claimIds(h, q, 'c2', 4)).ids, []);
      await h.client.configure(q, { groupConcurrency: 3 });
      assert.deepEqual((await claimIds(h, q, 'c2', 4)).ids, ['m-2', 'm-3']);
      await h.client.configure(q, { groupConcurrency: null });
      assert.deepEqual((await claimIds(h, q, 'c3', 4)).ids, ['m-4']);
    });

    storeTest(fixture, 'groups count separately, and ungrouped messages are never limited', async (h) => {
      const q = h.queue('group-separate');
      await h.client.configure(q, { groupConcurrency: 1 });
      await h.client.enqueueBatch(q, [
        { payload: 1, id: 'a-1', group: 'a' },
        { payload: 2, id: 'a-2', group: 'a' },
        { payload: 3, id: 'b-1', group: 'b' },
        { payload: 4, id: 'b-2', group: 'b' },
        { payload: 5, id: 'u-1' },
        { payload: 6, id: 'u-2' },
      ]);
      assert.deepEqual((await claimIds(h, q, 'c1', 10)).ids.sort(), ['a-1', 'b-1', 'u-1', 'u-2']);
      assert.deepEqual((await claimIds(h, q, 'c2', 10)).ids, []);
      await finishOk(h, q, 'c1', 'a-1');
      assert.deepEqual((await claimIds(h, q, 'c2', 10)).ids, ['a-2']);
    });

    storeTest(
      fixture,
      'a bad group or groupConcurrency is a TypeError naming what is allowed; nothing written',
      async (h) => {
        const q = h.queue('group-bad');
        for (const bad of ['', 'has space', 'x'.repeat(65), 'a/b', 5, null]) {
          await assert.rejects(
            h.client.enqueue(q, 'x', { id: 'bad', group: loose(bad) }),
            (error: unknown) => error instanceof TypeError && /group/.test(error.message) && /64/.test(error.message),
            String(bad),
          );
        }
        for (const bad of [0, -1, 1.5, '2', 100_001]) {
          await assert.rejects(
            h.client.configure(q, { groupConcurrency: loose(bad) }),
            (error: unknown) => error instanceof TypeError && /groupConcurrency/.test(error.message),
            String(bad),
          );
        }
        assert.equal(await h.client.status(q, 'bad'), null);
        assert.equal((await h.client.queueStatus(q)).total, 0);
        assert.equal((await h.client.config(q)).groupConcurrency, null);
      },
    );
  });
}
