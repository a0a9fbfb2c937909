/** A handler's result: stored with its success, read back by status, show, list and waitFor, bounded. */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { RESULT_MAX_BYTES, type CompletedEvent, type Handler, type QueueEvent } from '../../src/index.js';
import { storeTest } from '../support/harness.js';
import { JobLog, waitForStatus } from '../support/jobs.js';
import { gate, waitFor } from '../support/wait.js';
import type { StoreFixture } from '../support/fixture.js';

interface Sum {
  readonly a: number;
  readonly b: number;
}

export function results(fixture: StoreFixture): void {
  void describe('results', () => {
    storeTest(fixture, 'a success keeps its result: status, show, list, waitFor and completed', async (h) => {
      const q = h.queue('sums');
      const sums = h.client.queue<Sum, { sum: number }>(q);
      const heard: CompletedEvent[] = [];
      const worker = h.worker<Sum, { sum: number }>(q, ({ payload }) => ({
        status: 'success',
        result: { sum: payload.a + payload.b },
      }));
      worker.on('completed', (event) => heard.push(event));
      const { id } = await sums.enqueue({ a: 2, b: 3 });
      const outcome = await sums.waitFor(id, { timeoutMs: 10_000 });
      assert.equal(outcome.outcome, 'completed');
      assert.deepEqual(outcome.result, { sum: 5 });
      assert.deepEqual(outcome.status?.result, { sum: 5 });
      assert.deepEqual((await sums.status(id))?.result, { sum: 5 });
      assert.deepEqual((await sums.show(id))?.result, { sum: 5 });
      const listed = await h.client.list(q, { payload: true });
      assert.deepEqual(
        listed.messages.map((m) => [m.id, m.result]),
        [[id, { sum: 5 }]],
      );
      // Without content a listing reads no results.
      assert.equal('result' in ((await h.client.list(q)).messages[0] ?? {}), false);
      await waitFor(() => heard.length === 1);
      assert.deepEqual(heard[0]?.result, { sum: 5 });
    });

    storeTest(fixture, 'no result stores none; bytes stay bytes; JSON null is a result', async (h) => {
      const q = h.queue('kinds');
      h.worker(
        q,
        ({ id }) => {
          if (id === 'bytes') return { status: 'success', result: Buffer.from([0, 1, 2, 255]) };
          if (id === 'null') return { status: 'success', result: null };
          if (id === 'backoff') return { status: 'success', backoffMs: 60_000, result: 'text' };
          return undefined;
        },
        { concurrency: 4 },
      );
      for (const id of ['none', 'bytes', 'null', 'backoff']) await h.client.enqueue(q, id, { id });
      for (const id of ['none', 'bytes', 'null']) await waitForStatus(h.client, q, id, 'done-awaiting-gc');
      await waitForStatus(h.client, q, 'backoff', 'done-with-backoff');
      const none = await h.client.status(q, 'none');
      assert.equal(none !== null && 'result' in none, false);
      const bytes = (await h.client.status(q, 'bytes'))?.result;
      assert.ok(Buffer.isBuffer(bytes), 'bytes come back as a Buffer');
      assert.deepEqual([...bytes], [0, 1, 2, 255]);
      const nul = await h.client.status(q, 'null');
      assert.equal(nul !== null && 'result' in nul, true);
      assert.equal(nul?.result, null);
      assert.equal((await h.client.status(q, 'backoff'))?.result, 'text');
    });

    storeTest(fixture, "a completed queue event carries the success's result, whole", async (h) => {
      const q = h.queue('told');
      await h.client.configure(q, { events: true });
      const largest = 'y'.repeat(RESULT_MAX_BYTES - 2);
      const results: Record<string, unknown> = {
        json: { sum: 5, text: 'a "quoted"\\ line\nand the next' },
        bytes: Buffer.from([0, 10, 92, 255]),
        null: null,
        largest,
      };
      h.worker(
        q,
        ({ id }) => {
          if (id === 'none') return undefined;
          // A success's error text is no result: its event has none.
          if (id === 'noted') return { status: 'success', error: 'a note' };
          return { status: 'success', result: results[id] };
        },
        { concurrency: 6 },
      );
      // Read by another client, as a process that only watches would.
      const watcher = await h.connect();
      const ids = [...Object.keys(results), 'none', 'noted'];
      const heard = new Map<string, QueueEvent>();
      const following = (async () => {
        for await (const event of watcher.events(q, { after: 'start' })) {
          if (event.type === 'completed') heard.set(event.id, event);
          if (heard.size === ids.length) return;
        }
      })();
      for (const id of ids) await h.client.enqueue(q, id, { id });
      await following;
      assert.deepEqual(heard.get('json')?.result, results.json);
      const bytes = heard.get('bytes')?.result;
      assert.ok(Buffer.isBuffer(bytes), 'bytes come back as a Buffer');
      assert.deepEqual([...bytes], [0, 10, 92, 255]);
      assert.equal(heard.get('null') !== undefined && 'result' in (heard.get('null') ?? {}), true);
      assert.equal(heard.get('null')?.result, null);
      // Compared as a flag: a failure would print 64 KiB.
      assert.equal(heard.get('largest')?.result === largest, true, 'the largest result is whole');
      for (const id of ['none', 'noted']) {
        const event = heard.get(id);
        assert.equal(event !== undefined && ('result' in event || 'error' in event), false, id);
      }
      // A page read gives the same.
      const page = (await watcher.readEvents(q)).events.filter((e) => e.type === 'completed' && e.id === 'json');
      assert.deepEqual(page[0]?.result, results.json);
    });

    storeTest(fixture, 'a result too large or not encodable fails the attempt, naming why', async (h) => {
      const q = h.queue('bad');
      h.worker(q, ({ id }) => {
        if (id === 'large') return { status: 'success', result: 'x'.repeat(RESULT_MAX_BYTES) };
        if (id === 'bigint') return { status: 'success', result: { n: 1n } };
        if (id === 'with-error') return { status: 'error', error: 'no', result: 1 };
        return { status: 'success', result: 'x'.repeat(RESULT_MAX_BYTES - 2) };
      });
      for (const id of ['large', 'bigint', 'with-error', 'largest']) await h.client.enqueue(q, id, { id });
      const large = await waitForStatus(h.client, q, 'large', 'failed');
      assert.match(large.lastError ?? '', new RegExp(`over the limit of ${RESULT_MAX_BYTES} bytes`));
      assert.equal('result' in large, false);
      assert.match((await waitForStatus(h.client, q, 'bigint', 'failed')).lastError ?? '', /not JSON-encodable/);
      assert.match((await waitForStatus(h.client, q, 'with-error', 'failed')).lastError ?? '', /only a success/);
      // Exactly the limit, encoded (the JSON string's quotes count), is kept.
      const largest = await waitForStatus(h.client, q, 'largest', 'done-awaiting-gc');
      assert.equal((largest.result as string).length, RESULT_MAX_BYTES - 2);
    });

    storeTest(fixture, 'a revived or requeued message starts its run without a result', async (h) => {
      const q = h.queue('runs');
      const release = gate();
      const log = new JobLog();
      const handler: Handler = async (job) => {
        log.record(job);
        if (job.payload === 'hold') await release.opened;
        return job.payload === 'quiet' ? undefined : { status: 'success', result: job.payload };
      };
      const first = h.worker(q, handler);
      await h.client.enqueue(q, 'first', { id: 'revived' });
      assert.equal((await waitForStatus(h.client, q, 'revived', 'done-awaiting-gc')).result, 'first');
      assert.equal((await h.client.enqueue(q, 'quiet', { id: 'revived' })).ok, true);
      await log.count(2);
      assert.equal('result' in (await waitForStatus(h.client, q, 'revived', 'done-awaiting-gc')), false);

      await h.client.enqueue(q, 'hold', { id: 'requeued' });
      await log.handled('requeued');
      const again = await h.client.enqueue(q, 'quiet', { id: 'requeued', allowRequeue: true, replacePayload: true });
      assert.equal(again.ok, true);
      // Stopped while the handler runs: its success (with a result) is stored, and the requeued run waits.
      const stopping = first.stop();
      release.open();
      await stopping;
      const waiting = await waitForStatus(h.client, q, 'requeued', 'queued');
      assert.equal('result' in waiting, false);
      h.worker(q, handler);
      await log.count(4);
      assert.equal('result' in (await waitForStatus(h.client, q, 'requeued', 'done-awaiting-gc')), false);
    });

    storeTest(fixture, 'a batch of finishes whose results add up to megabytes is stored whole', async (h) => {
      const q = h.queue('large');
      const count = 20;
      const large = (n: number): string => String(n % 10).repeat(RESULT_MAX_BYTES - 2);
      h.worker(q, ({ payload }) => ({ status: 'success', result: large(payload as number) }), {
        concurrency: count,
      });
      await h.client.enqueueBatch(
        q,
        Array.from({ length: count }, (_, n) => ({ payload: n, id: `m${n}` })),
      );
      for (let n = 0; n < count; n++) {
        const status = await waitForStatus(h.client, q, `m${n}`, 'done-awaiting-gc', { timeoutMs: 20_000 });
        assert.equal(status.result, large(n), `m${n}`);
      }
    });

    storeTest(fixture, 'one finish batch mixes results and plain successes, each kept with its own', async (h) => {
      const q = h.queue('batch');
      h.worker(
        q,
        ({ payload }) =>
          typeof payload === 'number' && payload % 2 === 0 ? undefined : { status: 'success', result: { n: payload } },
        {
          concurrency: 8,
        },
      );
      const ids = (
        await h.client.enqueueBatch(
          q,
          Array.from({ length: 20 }, (_, n) => ({ payload: n, id: `m${n}` })),
        )
      ).map((r) => r.id);
      for (const [n, id] of ids.entries()) {
        const status = await waitForStatus(h.client, q, id, 'done-awaiting-gc');
        if (n % 2 === 0) assert.equal('result' in status, false, id);
        else assert.deepEqual(status.result, { n }, id);
      }
    });
  });
}
