/**
 * Tracing without an SDK (its own file, so no provider was ever registered in this process): messages
 * carry nothing extra, handlers see no span, and a propagator alone still injects nothing.
 */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { propagation, trace, type TextMapPropagator } from '@opentelemetry/api';
import { TRACE_METADATA_KEY } from '../src/index.js';
import { storeTest } from './support/harness.js';
import { JobLog } from './support/jobs.js';
import { redisFixture, sqliteFixture } from './support/stores.js';
import type { StoreFixture } from './support/fixture.js';

/** Writes a field whatever the context holds: kvmq must not even ask it without a span to carry. */
const eagerPropagator: TextMapPropagator = {
  inject: (_context, carrier, setter) => setter.set(carrier, 'x-eager', 'written'),
  extract: (context) => context,
  fields: () => ['x-eager'],
};

function untraced(fixture: StoreFixture): void {
  void describe(`tracing without an SDK: ${fixture.name}`, () => {
    storeTest(fixture, 'enqueue writes only the metadata given, and the handler sees no span', async (h) => {
      const q = h.queue('untraced');
      const log = new JobLog();
      let activeSpan: unknown = 'not called';
      h.worker(q, (job) => {
        log.record(job);
        activeSpan = trace.getActiveSpan();
      });
      await h.client.enqueue(q, 'x', { id: 'one', metadata: { user: 1 } });
      await h.client.enqueueBatch(q, [{ payload: 'y', id: 'two' }]);
      await log.count(2);
      assert.deepEqual((await h.client.show(q, 'one'))?.metadata, { user: 1 });
      assert.deepEqual((await h.client.show(q, 'two'))?.metadata, {});
      assert.deepEqual((await log.handled('one')).job.metadata, { user: 1 });
      assert.equal(activeSpan, undefined);
    });

    storeTest(fixture, 'a propagator without a tracer provider injects nothing either', async (h) => {
      propagation.setGlobalPropagator(eagerPropagator);
      h.cleanup(() => propagation.disable());
      const q = h.queue('propagator-only');
      await h.client.enqueue(q, 'x', { id: 'one' });
      const metadata = (await h.client.show(q, 'one'))?.metadata ?? {};
      assert.equal(Object.hasOwn(metadata, TRACE_METADATA_KEY), false);
    });
  });
}

untraced(sqliteFixture());
untraced(redisFixture());
