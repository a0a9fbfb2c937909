/**
 * Tracing without an SDK (its own file, so no provider was ever registered in this process): messages
 * carry nothing extra, handlers see no span, and a propagator alone still injects nothing. A process that
 * registers nothing does not even load the API, and starts tracing when an SDK is registered later.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { propagation, trace, type TextMapPropagator } from '@opentelemetry/api';
import { TRACE_METADATA_KEY } from '../src/index.js';
import { spawnChild } from './support/child.js';
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

void describe('tracing: the API is loaded only once an app registers with it', () => {
  test('a process that registers nothing never loads it; an SDK registered later traces the next message', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kvmq-otel-late-'));
    try {
      const child = spawnChild('otel-late-process.ts', [`sqlite:${join(dir, 'kvmq.db')}`]);
      const before = await child.line(/^before .*$/, 30_000);
      const after = await child.line(/^after .*$/, 30_000);
      assert.equal((await child.exited).code, 0, child.stderr);
      // Not loaded, and the message carries no trace context.
      assert.equal(before[0], 'before false ');
      assert.equal(after[0], 'after process late,send late');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
