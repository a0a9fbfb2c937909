/** Priorities: lower numbers run first, strictly across messages, first in first out within one. */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { storeTest, type Harness } from '../support/harness.js';
import { passedOverByRefills } from '../support/priority-refill.js';
import { assertNothingWritten, assertOptionsRefused } from '../support/refused-options.js';
import { JobLog } from '../support/jobs.js';
import { handledUntilDry } from '../support/until-dry.js';
import type { WorkerOptions } from '../../src/index.js';
import type { StoreFixture } from '../support/fixture.js';

const CLASSES = ['low', 'standard'];

/** Runs a one-at-a-time worker until it handled `expected` and then found nothing else; returns the order. */
export async function handledOrder(
  h: Harness,
  q: string,
  expected: number,
  options: WorkerOptions = {},
): Promise<string[]> {
  return (await handledUntilDry(h, q, expected, options)).ids();
}

export function priority(fixture: StoreFixture): void {
  void describe('priority', () => {
    storeTest(fixture, 'lower priority numbers run first; first in first out within one priority', async (h) => {
      const q = h.queue('priority-order');
      const sent: [string, number | undefined][] = [
        ['p5-a', 5],
        ['p1-a', 1],
        ['default-a', undefined],
        ['p1000', 1000],
        ['p5-b', 5],
        ['p0-b', 0],
        ['p1-b', 1],
        ['default-c', undefined],
      ];
      for (const [id, priority] of sent) {
        await h.client.enqueue(q, id, priority === undefined ? { id } : { id, priority });
      }
      assert.deepEqual(await handledOrder(h, q, sent.length), [
        'default-a',
        'p0-b',
        'default-c',
        'p1-a',
        'p1-b',
        'p5-a',
        'p5-b',
        'p1000',
      ]);
    });

    storeTest(fixture, 'a batch is ordered by priority too, and a later urgent message overtakes', async (h) => {
      const q = h.queue('priority-batch');
      await h.client.enqueueBatch(q, [
        { payload: 1, id: 'b-9', priority: 9 },
        { payload: 2, id: 'b-3', priority: 3 },
        { payload: 3, id: 'b-9-second', priority: 9 },
      ]);
      await h.client.enqueue(q, 4, { id: 'urgent', priority: 2 });
      assert.deepEqual(await handledOrder(h, q, 4), ['urgent', 'b-3', 'b-9', 'b-9-second']);
    });

    storeTest(fixture, 'with filters a worker takes by priority only among the classes it accepts', async (h) => {
      const q = h.queue('priority-filters');
      await h.client.configure(q, { filterEnums: { performance_class: CLASSES } });
      await h.client.enqueue(q, 'x', { id: 'low-urgent', priority: 0, filters: { performance_class: 'low' } });
      await h.client.enqueue(q, 'x', { id: 'std-late', priority: 9, filters: { performance_class: 'standard' } });
      await h.client.enqueue(q, 'x', { id: 'plain-mid', priority: 4 });
      await h.client.enqueue(q, 'x', { id: 'std-urgent', priority: 1, filters: { performance_class: 'standard' } });
      const order = await handledOrder(h, q, 3, { filters: { performance_class: 'standard' } });
      assert.deepEqual(order, ['std-urgent', 'plain-mid', 'std-late']);
      assert.equal((await h.client.status(q, 'low-urgent'))?.state, 'queued');
      // A worker that accepts it takes it.
      assert.deepEqual(await handledOrder(h, q, 1, { filters: { performance_class: 'low' } }), ['low-urgent']);
    });

    storeTest(fixture, 'a refill of a drained higher priority is not passed over by later claims', async (h) => {
      const q = h.queue('priority-refill');
      await h.client.configure(q, { events: true });
      const consumer = await h.connect();
      const passedOver = await passedOverByRefills(
        h.client,
        q,
        (handler) => h.worker(q, handler, { concurrency: 8 }, consumer),
        { rounds: 8, low: 60, urgent: 12 },
      );
      assert.deepEqual(passedOver, [], 'priority-600 claims committed while refilled 500s waited');
    });

    storeTest(fixture, 'a retried message keeps its priority', async (h) => {
      const q = h.queue('priority-retry');
      await h.client.enqueue(q, 'x', { id: 'late', priority: 7 });
      await h.client.enqueue(q, 'x', { id: 'urgent', priority: 1 });
      const log = new JobLog();
      h.worker(
        q,
        (job) => {
          log.record(job);
          if (job.id === 'urgent' && job.attempt === 1) throw new Error('once more');
        },
        { concurrency: 1, maxAttempts: 2, retryBackoffMs: 0 },
      );
      await log.count(3);
      assert.deepEqual(
        log.seen.map((s) => `${s.id}#${s.attempt}`),
        ['urgent#1', 'urgent#2', 'late#1'],
      );
    });

    storeTest(fixture, 'inspect (show) returns the stored priority and group', async (h) => {
      const q = h.queue('priority-show');
      await h.client.enqueue(q, 'x', { id: 'set', priority: 7, group: 'tenant-a' });
      await h.client.enqueue(q, 'x', { id: 'plain' });
      const set = await h.client.show(q, 'set');
      assert.equal(set?.priority, 7);
      assert.equal(set.group, 'tenant-a');
      const plain = await h.client.show(q, 'plain');
      assert.equal(plain?.priority, 0);
      assert.equal(plain.group, null);
    });

    storeTest(fixture, 'a bad priority is a TypeError naming what is allowed, and nothing is written', async (h) => {
      const q = h.queue('priority-bad');
      for (const bad of [-1, 1.5, 1001, '1', null, Number.NaN]) {
        await assertOptionsRefused(
          h,
          q,
          { priority: bad },
          (e) => /priority/.test(e.message) && /1000/.test(e.message),
        );
      }
      await assertNothingWritten(h, q);
    });
  });
}
