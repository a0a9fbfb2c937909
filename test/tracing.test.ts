/**
 * OpenTelemetry tracing with an SDK installed (the SDK's in-memory exporter): a producer span per
 * enqueue, a consumer span per handling that is the child of the producer's context carried through the
 * store, handler spans nested under it, failures marked ERROR. On SQLite and Redis.
 */
import assert from 'node:assert/strict';
import { after, beforeEach, describe } from 'node:test';
import { SpanKind, SpanStatusCode, context, trace, type SpanContext } from '@opentelemetry/api';
import {
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { TRACE_METADATA_KEY, type Client, type MessageStatus } from '../src/index.js';
import { storeTest, type Harness } from './support/harness.js';
import { redisFixture, sqliteFixture } from './support/stores.js';
import { untilAborted, waitFor } from './support/wait.js';
import type { StoreFixture } from './support/fixture.js';

const exporter = new InMemorySpanExporter();

/** Reads the message's status the moment its `process` span ends: the outcome must be stored by then. */
class StatusAtEnd implements SpanProcessor {
  client: Client | null = null;
  readonly statuses = new Map<ReadableSpan, Promise<MessageStatus | null>>();
  onStart(): void {}
  onEnd(span: ReadableSpan): void {
    const { client } = this;
    const queue = span.attributes['messaging.destination.name'];
    const id = span.attributes['messaging.message.id'];
    if (client === null || span.kind !== SpanKind.CONSUMER || typeof queue !== 'string' || typeof id !== 'string') {
      return;
    }
    this.statuses.set(span, client.status(queue, id));
  }
  forceFlush(): Promise<void> {
    return Promise.resolve();
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

const atEnd = new StatusAtEnd();
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter), atEnd] });
// The W3C propagator and the AsyncLocalStorage context manager, as an app's SDK setup installs them.
provider.register();
const appTracer = trace.getTracer('app');

after(() => provider.shutdown());

beforeEach(() => {
  exporter.reset();
  atEnd.statuses.clear();
  atEnd.client = null;
});

function spansNamed(name: string): ReadableSpan[] {
  return exporter.getFinishedSpans().filter((span) => span.name === name);
}

async function oneSpan(name: string): Promise<ReadableSpan> {
  const [span] = await waitFor(
    () => {
      const found = spansNamed(name);
      return found.length > 0 && found;
    },
    {
      what: () =>
        `a span '${name}' (finished: ${exporter
          .getFinishedSpans()
          .map((s) => s.name)
          .join(', ')})`,
    },
  );
  return span as ReadableSpan;
}

function sameSpan(actual: SpanContext | undefined, expected: SpanContext): void {
  assert.ok(actual, 'a span context');
  assert.equal(actual.traceId, expected.traceId, 'trace id');
  assert.equal(actual.spanId, expected.spanId, 'span id');
}

/** A second client for the worker, so the context must travel through the store. */
async function consumerClient(h: Harness): Promise<Client> {
  const consumer = await h.connect();
  atEnd.client = consumer;
  return consumer;
}

function tracing(fixture: StoreFixture): void {
  void describe(`tracing: ${fixture.name}`, () => {
    storeTest(fixture, 'a send span per enqueue, and a process span that is its child across clients', async (h) => {
      const q = h.queue('traced');
      const consumer = await consumerClient(h);
      const handlerSaw: SpanContext[] = [];
      h.worker(
        q,
        () => {
          const active = trace.getActiveSpan();
          if (active !== undefined) handlerSaw.push(active.spanContext());
          appTracer.startSpan('handler work').end();
        },
        {},
        consumer,
      );
      await appTracer.startActiveSpan('app request', async (request) => {
        await h.client.enqueue(q, { n: 1 }, { id: 'm1', metadata: { user: 'kept' } });
        request.end();
      });

      const send = await oneSpan(`send ${q}`);
      const request = await oneSpan('app request');
      assert.equal(send.kind, SpanKind.PRODUCER);
      sameSpan(send.parentSpanContext, request.spanContext());
      assert.deepEqual(send.attributes, {
        'messaging.system': 'kvmq',
        'messaging.destination.name': q,
        'messaging.operation.name': 'send',
        'messaging.operation.type': 'send',
        'messaging.message.id': 'm1',
      });

      const process = await oneSpan(`process ${q}`);
      assert.equal(process.kind, SpanKind.CONSUMER);
      sameSpan(process.parentSpanContext, send.spanContext());
      assert.equal(process.links.length, 1);
      sameSpan(process.links[0]?.context, send.spanContext());
      assert.equal(process.attributes['messaging.system'], 'kvmq');
      assert.equal(process.attributes['messaging.destination.name'], q);
      assert.equal(process.attributes['messaging.operation.type'], 'process');
      assert.equal(process.attributes['messaging.message.id'], 'm1');
      assert.equal(process.attributes['messaging.kvmq.message.attempt'], 1);
      assert.equal(process.attributes['messaging.kvmq.message.outcome'], 'success');
      assert.match(String(process.attributes['messaging.client.id']), /:/);
      assert.equal(process.status.code, SpanStatusCode.UNSET);

      // The handler ran with the process span active, so its own span nests under it.
      assert.equal(handlerSaw.length, 1);
      sameSpan(handlerSaw[0], process.spanContext());
      const work = await oneSpan('handler work');
      sameSpan(work.parentSpanContext, process.spanContext());

      // Ended once the store held the outcome.
      const status = await atEnd.statuses.get(process);
      assert.equal(status?.outcome, 'success');

      // What travelled: the W3C traceparent of the send span, beside the app's own metadata.
      const shown = await h.client.show(q, 'm1');
      const { traceId, spanId } = send.spanContext();
      assert.deepEqual(shown?.metadata, {
        user: 'kept',
        [TRACE_METADATA_KEY]: { traceparent: `00-${traceId}-${spanId}-01` },
      });
    });

    storeTest(fixture, 'a batch has one send span that counts its messages; each handling is its child', async (h) => {
      const q = h.queue('batch');
      const consumer = await consumerClient(h);
      await h.client.enqueueBatch(q, [
        { payload: 1, id: 'a' },
        { payload: 2, id: 'b' },
        { payload: 3, id: 'c' },
      ]);
      h.worker(q, () => undefined, { concurrency: 3 }, consumer);
      const send = await oneSpan(`send ${q}`);
      assert.equal(send.attributes['messaging.batch.message_count'], 3);
      assert.equal(send.attributes['messaging.message.id'], undefined);
      const processes = await waitFor(() => {
        const found = spansNamed(`process ${q}`);
        return found.length === 3 && found;
      });
      assert.deepEqual(processes.map((span) => span.attributes['messaging.message.id']).sort(), ['a', 'b', 'c']);
      for (const process of processes) sameSpan(process.parentSpanContext, send.spanContext());
      assert.equal(spansNamed(`send ${q}`).length, 1);
    });

    storeTest(fixture, 'a thrown error, an error result and a timeout set status ERROR', async (h) => {
      const q = h.queue('failing');
      const consumer = await consumerClient(h);
      h.worker(
        q,
        async (job) => {
          if (job.id === 'slow') await untilAborted(job.signal);
          if (job.id === 'throws' && job.attempt === 1) throw new RangeError('out of range');
          if (job.id === 'throws') return { status: 'error', error: 'gave up' };
          return undefined;
        },
        { maxAttempts: 2, retryBackoffMs: 0, concurrency: 2 },
        consumer,
      );
      await h.client.enqueue(q, 'x', { id: 'throws' });
      await h.client.enqueue(q, 'x', { id: 'slow', timeoutMs: 50, attempts: 1 });

      const spans = await waitFor(() => {
        const found = spansNamed(`process ${q}`);
        return found.length === 3 && found;
      });
      const of = (id: string, attempt: number): ReadableSpan => {
        const span = spans.find(
          (s) =>
            s.attributes['messaging.message.id'] === id && s.attributes['messaging.kvmq.message.attempt'] === attempt,
        );
        assert.ok(span, `a process span for ${id}#${attempt}`);
        return span;
      };

      const thrown = of('throws', 1);
      assert.equal(thrown.status.code, SpanStatusCode.ERROR);
      assert.equal(thrown.status.message, 'RangeError: out of range');
      assert.equal(thrown.attributes['error.type'], 'RangeError');
      assert.equal(thrown.attributes['messaging.kvmq.message.outcome'], 'retry');
      const exception = thrown.events.find((event) => event.name === 'exception');
      assert.equal(exception?.attributes?.['exception.message'], 'out of range');

      const result = of('throws', 2);
      assert.equal(result.status.code, SpanStatusCode.ERROR);
      assert.equal(result.status.message, 'gave up');
      assert.equal(result.attributes['error.type'], '_OTHER');
      assert.equal(result.attributes['messaging.kvmq.message.outcome'], 'error');
      assert.equal((await atEnd.statuses.get(result))?.state, 'failed');

      const timedOut = of('slow', 1);
      assert.equal(timedOut.status.code, SpanStatusCode.ERROR);
      assert.equal(timedOut.status.message, 'timed out after 50 ms');
      assert.equal(timedOut.attributes['error.type'], 'TimeoutError');
      assert.equal(timedOut.attributes['messaging.kvmq.message.outcome'], 'error');
    });

    storeTest(fixture, 'a handling whose message is taken away ends as lost, with status ERROR', async (h) => {
      const q = h.queue('lost');
      const consumer = await consumerClient(h);
      let started = false;
      h.worker(
        q,
        async (job) => {
          started = true;
          await untilAborted(job.signal);
        },
        { lockMs: 300 },
        consumer,
      );
      await h.client.enqueue(q, 'x', { id: 'taken' });
      await waitFor(() => started, { what: 'the handler to start' });
      // Clearing the queue takes the running message away: the next renewal finds it gone.
      await h.client.clear(q);
      const process = await oneSpan(`process ${q}`);
      assert.equal(process.attributes['messaging.kvmq.message.outcome'], 'lost');
      assert.equal(process.status.code, SpanStatusCode.ERROR);
      assert.equal(process.status.message, 'lock lost');
    });

    storeTest(
      fixture,
      'a trace context the app put under the reserved key is kept, and the send span links to it',
      async (h) => {
        const q = h.queue('own-context');
        const consumer = await consumerClient(h);
        const own = appTracer.startSpan('earlier work');
        own.end();
        const carrier: Record<string, string> = {};
        const { traceId, spanId } = own.spanContext();
        carrier.traceparent = `00-${traceId}-${spanId}-01`;
        await h.client.enqueue(q, 'x', { id: 'own', metadata: { [TRACE_METADATA_KEY]: carrier } });
        h.worker(q, () => undefined, {}, consumer);

        const send = await oneSpan(`send ${q}`);
        assert.equal(send.links.length, 1);
        sameSpan(send.links[0]?.context, own.spanContext());
        const process = await oneSpan(`process ${q}`);
        sameSpan(process.parentSpanContext, own.spanContext());
        assert.deepEqual((await h.client.show(q, 'own'))?.metadata, { [TRACE_METADATA_KEY]: carrier });
      },
    );

    storeTest(
      fixture,
      'a handling outside any trace does not join the trace active where the worker started',
      async (h) => {
        const q = h.queue('no-context');
        const consumer = await consumerClient(h);
        const ambient = appTracer.startSpan('worker setup');
        context.with(trace.setSpan(context.active(), ambient), () => {
          h.worker(q, () => undefined, {}, consumer);
        });
        ambient.end();
        // A message whose producer carried nothing (its key holds no usable context).
        await context.with(trace.deleteSpan(context.active()), () =>
          h.client.enqueue(q, 'x', { id: 'plain', metadata: { [TRACE_METADATA_KEY]: 'not a carrier' } }),
        );
        const process = await oneSpan(`process ${q}`);
        assert.equal(process.parentSpanContext, undefined);
        assert.deepEqual(process.links, []);
        assert.notEqual(process.spanContext().traceId, ambient.spanContext().traceId);
      },
    );
  });
}

tracing(sqliteFixture());
tracing(redisFixture());
