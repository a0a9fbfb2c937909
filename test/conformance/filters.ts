/** zkmq filters: ordered enums in the queue's configuration, absolute and at_least workers. */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { FilterError, type WorkerOptions } from '../../src/index.js';
import { storeTest, type Harness } from '../support/harness.js';
import type { JobLog } from '../support/jobs.js';
import { handledUntilDry } from '../support/until-dry.js';
import type { StoreFixture } from '../support/fixture.js';

const CLASSES = ['low', 'standard', 'performance', 'high_performance'];

/** A queue with the performance_class enum and one message per class (id = class), plus 'plain' with none. */
async function filteredQueue(h: Harness, label: string): Promise<string> {
  const q = h.queue(label);
  await h.client.configure(q, { filterEnums: { performance_class: CLASSES } });
  for (const value of CLASSES) await h.client.enqueue(q, value, { id: value, filters: { performance_class: value } });
  await h.client.enqueue(q, 'plain', { id: 'plain' });
  return q;
}

/**
 * Runs a worker until it has handled `expected` and then polled and found
 * nothing else it may take, a dry run of the queue; returns the ids it handled.
 */
function takes(h: Harness, q: string, options: WorkerOptions, expected: number): Promise<JobLog> {
  return handledUntilDry(h, q, expected, options, { dryRun: true });
}

export function filters(fixture: StoreFixture): void {
  void describe('filters', () => {
    storeTest(
      fixture,
      'an undeclared filter or a value outside the enum is refused with FilterError, nothing written',
      async (h) => {
        const q = h.queue('filter-refused');
        await h.client.configure(q, { filterEnums: { performance_class: CLASSES } });
        await assert.rejects(
          h.client.enqueue(q, 'x', { id: 'bad-value', filters: { performance_class: 'extreme' } }),
          (error: unknown) =>
            error instanceof FilterError && /extreme/.test(error.message) && /standard/.test(error.message),
        );
        await assert.rejects(
          h.client.enqueue(q, 'x', { id: 'bad-name', filters: { region: 'eu' } }),
          (error: unknown) => error instanceof FilterError && /region/.test(error.message),
        );
        // One bad item refuses the whole batch.
        await assert.rejects(
          h.client.enqueueBatch(q, [
            { payload: 1, id: 'good', filters: { performance_class: 'low' } },
            { payload: 2, id: 'bad', filters: { performance_class: 'ultra' } },
          ]),
          FilterError,
        );
        for (const id of ['bad-value', 'bad-name', 'good', 'bad']) assert.equal(await h.client.status(q, id), null, id);
        assert.equal((await h.client.queueStatus(q)).total, 0);
      },
    );

    storeTest(
      fixture,
      'absolute: a worker takes only messages with its value (and ones without filters)',
      async (h) => {
        const q = await filteredQueue(h, 'absolute');
        const log = await takes(h, q, { filters: { performance_class: 'standard' } }, 2);
        assert.deepEqual(log.ids().sort(), ['plain', 'standard']);
        assert.deepEqual((await log.handled('standard')).job.filters, { performance_class: 'standard' });
        for (const id of ['low', 'performance', 'high_performance']) {
          assert.equal((await h.client.status(q, id))?.state, 'queued', id);
        }
      },
    );

    storeTest(fixture, 'at_least: a worker takes messages ranked at or below its value', async (h) => {
      const q = await filteredQueue(h, 'at-least');
      const log = await takes(
        h,
        q,
        { filters: { performance_class: { value: 'performance', method: 'at_least' } } },
        4,
      );
      assert.deepEqual(log.ids().sort(), ['low', 'performance', 'plain', 'standard']);
      assert.equal((await h.client.status(q, 'high_performance'))?.state, 'queued');
    });

    storeTest(fixture, 'at_least high_performance takes standard and high_performance messages', async (h) => {
      const q = h.queue('at-least-top');
      await h.client.configure(q, { filterEnums: { performance_class: CLASSES } });
      await h.client.enqueue(q, 's', { id: 's', filters: { performance_class: 'standard' } });
      await h.client.enqueue(q, 'hp', { id: 'hp', filters: { performance_class: 'high_performance' } });
      const log = await takes(
        h,
        q,
        { filters: { performance_class: { value: 'high_performance', method: 'at_least' } } },
        2,
      );
      assert.deepEqual(log.ids().sort(), ['hp', 's']);
    });

    storeTest(fixture, 'respectFilters: false takes every message', async (h) => {
      const q = await filteredQueue(h, 'ignored');
      const log = await takes(h, q, { filters: { performance_class: 'low' }, respectFilters: false }, 5);
      assert.deepEqual(log.ids().sort(), [...CLASSES, 'plain'].sort());
      assert.deepEqual((await log.handled('performance')).job.filters, { performance_class: 'performance' });
    });

    storeTest(fixture, 'a message filter the worker does not declare excludes the message', async (h) => {
      const q = h.queue('two-filters');
      await h.client.configure(q, { filterEnums: { performance_class: CLASSES } });
      await h.client.configure(q, { filterEnums: { region: ['eu', 'us'] } });
      assert.deepEqual((await h.client.config(q)).filterEnums, { performance_class: CLASSES, region: ['eu', 'us'] });
      await h.client.enqueue(q, 'x', { id: 'eu-standard', filters: { performance_class: 'standard', region: 'eu' } });
      await h.client.enqueue(q, 'y', { id: 'standard', filters: { performance_class: 'standard' } });
      const narrow = await takes(h, q, { filters: { performance_class: 'standard' } }, 1);
      assert.deepEqual(narrow.ids(), ['standard']);
      const both = await takes(h, q, { filters: { performance_class: 'standard', region: 'eu' } }, 1);
      assert.deepEqual(both.ids(), ['eu-standard']);
      assert.deepEqual((await both.handled('eu-standard')).job.filters, {
        performance_class: 'standard',
        region: 'eu',
      });
    });

    storeTest(
      fixture,
      'a worker whose filter is not in the configuration fails start() with FilterError',
      async (h) => {
        const q = h.queue('filter-start');
        await h.client.configure(q, { filterEnums: { performance_class: CLASSES } });
        await h.client.enqueue(q, 'x', { id: 'm' });
        const badValue = h.worker(q, () => undefined, { filters: { performance_class: 'extreme' }, autoStart: false });
        await assert.rejects(badValue.start(), FilterError);
        const badName = h.worker(q, () => undefined, { filters: { region: 'eu' }, autoStart: false });
        await assert.rejects(badName.start(), FilterError);
        assert.equal(badValue.running, false);
        assert.equal(badName.running, false);
        assert.deepEqual((await h.client.queueStatus(q)).consumers, []);
        assert.equal((await h.client.status(q, 'm'))?.state, 'queued');
      },
    );
  });
}
