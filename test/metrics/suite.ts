/**
 * `client.metrics()` on one store: the exposition text (names, types, labels, values) after known work, the
 * per-queue gauges read at scrape time, lost locks, and clients that keep their metrics apart.
 */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { register as globalRegistry } from 'prom-client';
import { MESSAGE_STATES, type Job } from '../../src/index.js';
import type { StoreFixture } from '../support/fixture.js';
import { storeTest, type Harness } from '../support/harness.js';
import { waitFor } from '../support/wait.js';
import { parseExposition, type Exposition } from './exposition.js';

async function scrape(registry: { metrics(): Promise<string> }): Promise<Exposition> {
  return parseExposition(await registry.metrics());
}

/** Scrapes until `ready` holds for the exposition, which it returns. */
async function scrapeUntil(
  registry: { metrics(): Promise<string> },
  ready: (e: Exposition) => boolean,
  what: string,
): Promise<Exposition> {
  let last = '';
  return waitFor(
    async () => {
      last = await registry.metrics();
      const exposition = parseExposition(last);
      return ready(exposition) ? exposition : null;
    },
    { timeoutMs: 15_000, what: () => `${what}; last scrape:\n${last}` },
  );
}

function handler(job: Job): { status: 'success' | 'error' | 'retry'; backoffMs?: number; error?: string } {
  const kind = (job.payload as { kind: string }).kind;
  if (kind === 'bad') return { status: 'error', error: 'bad payload' };
  if (kind === 'again' && job.attempt === 1) return { status: 'retry', backoffMs: 0 };
  return { status: 'success' };
}

async function enqueueKinds(h: Harness, queue: string, kinds: readonly string[]): Promise<void> {
  await h.client.enqueueBatch(
    queue,
    kinds.map((kind) => ({ payload: { kind } })),
  );
}

export function metricsSuite(fixture: StoreFixture): void {
  void describe(`${fixture.name}: metrics`, () => {
    storeTest(fixture, 'worker and queue metrics after known work', async (h) => {
      const queue = h.queue('metrics');
      const registry = await h.client.metrics({ queues: [queue] });
      await enqueueKinds(h, queue, ['ok', 'ok', 'ok', 'ok', 'ok', 'bad', 'bad', 'again']);
      h.worker(queue, handler);
      const e = await scrapeUntil(
        registry,
        (e) =>
          e.value('kvmq_messages_handled_total', { queue, outcome: 'success' }) === 6 &&
          e.value('kvmq_messages_handled_total', { queue, outcome: 'error' }) === 2 &&
          e.value('kvmq_queue_messages', { queue, state: 'done-awaiting-gc' }) === 6,
        'six successes and two errors handled and stored',
      );
      assert.equal(e.value('kvmq_messages_handled_total', { queue, outcome: 'retry' }), 1);
      assert.equal(e.value('kvmq_messages_handled_total', { queue, outcome: 'lost' }), 0);
      assert.equal(e.value('kvmq_messages_claimed_total', { queue }), 9);
      assert.equal(e.value('kvmq_handler_duration_seconds_count', { queue }), 9);
      assert.equal(e.value('kvmq_handler_duration_seconds_bucket', { queue, le: '+Inf' }), 9);
      assert.ok((e.value('kvmq_claim_duration_seconds_count', { queue }) ?? 0) >= 2, 'claims timed');
      assert.ok((e.value('kvmq_finish_duration_seconds_count', { queue }) ?? 0) >= 2, 'finishes timed');
      assert.equal(e.value('kvmq_locks_lost_total', { queue }), 0);
      assert.equal(e.value('kvmq_messages_in_flight', { queue }), 0);
      assert.equal(e.value('kvmq_queue_messages', { queue, state: 'failed' }), 2);
      assert.equal(e.value('kvmq_queue_messages', { queue, state: 'queued' }), 0);
      assert.equal(e.value('kvmq_queue_messages', { queue, state: 'locked' }), 0);
      assert.equal(e.series('kvmq_queue_messages').length, MESSAGE_STATES.length, 'one series per state');
      assert.equal(e.value('kvmq_queue_consumers', { queue }), 1);
      assert.equal(e.value('kvmq_queue_paused', { queue }), 0);
      assert.equal(e.value('kvmq_queue_oldest_waiting_age_seconds', { queue }), 0);
      assert.equal(e.value('kvmq_queue_read_errors_total'), undefined, 'no read failed');
      const expected: Record<string, string> = {
        kvmq_messages_handled_total: 'counter',
        kvmq_messages_claimed_total: 'counter',
        kvmq_handler_duration_seconds: 'histogram',
        kvmq_claim_duration_seconds: 'histogram',
        kvmq_finish_duration_seconds: 'histogram',
        kvmq_lock_renewals_total: 'counter',
        kvmq_locks_lost_total: 'counter',
        kvmq_store_errors_total: 'counter',
        kvmq_messages_in_flight: 'gauge',
        kvmq_queue_messages: 'gauge',
        kvmq_queue_paused: 'gauge',
        kvmq_queue_consumers: 'gauge',
        kvmq_queue_dry_runs: 'gauge',
        kvmq_queue_oldest_waiting_age_seconds: 'gauge',
        kvmq_queue_read_errors_total: 'counter',
      };
      assert.deepEqual(Object.fromEntries(e.types), expected);
    });

    storeTest(fixture, 'queue gauges are read from the store at each scrape', async (h) => {
      const queue = h.queue('gauges');
      const registry = await h.client.metrics({ queues: [queue] });
      let e = await scrape(registry);
      assert.equal(e.value('kvmq_queue_messages', { queue, state: 'queued' }), 0);
      assert.equal(e.value('kvmq_queue_oldest_waiting_age_seconds', { queue }), 0);
      assert.equal(e.value('kvmq_messages_handled_total', { queue, outcome: 'success' }), undefined, 'no worker');

      const before = Date.now();
      await h.client.enqueue(queue, 'first');
      const after = Date.now();
      await h.client.enqueue(queue, 'second');
      await h.client.enqueue(queue, 'later', { initialBackoffMs: 3_600_000 });
      await h.client.pause(queue);
      const scrapeStart = Date.now();
      e = await scrape(registry);
      const scrapeEnd = Date.now();
      assert.equal(e.value('kvmq_queue_messages', { queue, state: 'queued' }), 2);
      assert.equal(e.value('kvmq_queue_messages', { queue, state: 'queued-with-backoff' }), 1);
      assert.equal(e.value('kvmq_queue_paused', { queue }), 1);
      assert.equal(e.value('kvmq_queue_consumers', { queue }), 0);
      const age = e.value('kvmq_queue_oldest_waiting_age_seconds', { queue }) ?? -1;
      // The first message is next in line: its age lies between what the clocks around enqueue and scrape allow.
      const slack = 0.05;
      assert.ok(age >= (scrapeStart - after) / 1000 - slack, `age ${age} s too small`);
      assert.ok(age <= (scrapeEnd - before) / 1000 + slack, `age ${age} s too large`);

      await h.client.resume(queue);
      await h.client.clear(queue);
      e = await scrape(registry);
      assert.equal(e.value('kvmq_queue_paused', { queue }), 0);
      assert.equal(e.value('kvmq_queue_messages', { queue, state: 'queued' }), 0);
      assert.equal(e.value('kvmq_queue_messages', { queue, state: 'queued-with-backoff' }), 0);
    });

    storeTest(fixture, 'a lock lost while the handler runs is counted', async (h) => {
      const queue = h.queue('lost');
      const registry = await h.client.metrics({ queues: [queue] });
      await h.client.enqueue(queue, 'held', { id: 'held-1' });
      let started = false;
      h.worker(
        queue,
        (job) => {
          started = true;
          return new Promise<void>((resolve) => job.signal.addEventListener('abort', () => resolve()));
        },
        { lockMs: 600 },
      );
      await waitFor(() => started, { what: 'the handler to start' });
      let e = await scrape(registry);
      assert.equal(e.value('kvmq_messages_in_flight', { queue }), 1);
      assert.equal(e.value('kvmq_queue_messages', { queue, state: 'locked' }), 1);
      await h.client.clear(queue);
      e = await scrapeUntil(
        registry,
        (e) => e.value('kvmq_locks_lost_total', { queue }) === 1,
        'the renewal to find the lock gone',
      );
      assert.equal(e.value('kvmq_messages_handled_total', { queue, outcome: 'lost' }), 1);
      assert.equal(e.value('kvmq_messages_handled_total', { queue, outcome: 'success' }), 0);
    });

    storeTest(fixture, 'two clients in one process keep their metrics apart', async (h) => {
      const qa = h.queue('a');
      const qb = h.queue('b');
      const other = await h.connect();
      h.worker(qa, () => undefined);
      h.worker(qb, () => undefined, {}, other);
      // Asked for after the workers started: they are measured from then on.
      const [ra, rb] = await Promise.all([h.client.metrics({ queues: [qa] }), other.metrics({ queues: [qb] })]);
      await h.client.enqueueBatch(qa, [{ payload: 1 }, { payload: 2 }]);
      await other.enqueueBatch(qb, [{ payload: 1 }, { payload: 2 }, { payload: 3 }]);
      const a = await scrapeUntil(
        ra,
        (e) => e.value('kvmq_messages_handled_total', { queue: qa, outcome: 'success' }) === 2,
        'two handled on a',
      );
      const b = await scrapeUntil(
        rb,
        (e) => e.value('kvmq_messages_handled_total', { queue: qb, outcome: 'success' }) === 3,
        'three handled on b',
      );
      assert.deepEqual(
        a.series('kvmq_messages_handled_total').filter((s) => s.labels.queue === qb),
        [],
        "b's worker is not in a's registry",
      );
      assert.deepEqual(
        b.series('kvmq_messages_handled_total').filter((s) => s.labels.queue === qa),
        [],
        "a's worker is not in b's registry",
      );
      // Workers measured from mid-claim on time no claim from a clock never read.
      const claims = a.value('kvmq_claim_duration_seconds_count', { queue: qa }) ?? 0;
      const claimSeconds = a.value('kvmq_claim_duration_seconds_sum', { queue: qa }) ?? Infinity;
      assert.ok(claims > 0 && claimSeconds / claims < 5, `${claims} claims took ${claimSeconds} s`);
      // A second registry of the same client shares its worker counters.
      const again = await scrape(await h.client.metrics({ queues: [qa] }));
      assert.equal(again.value('kvmq_messages_handled_total', { queue: qa, outcome: 'success' }), 2);
      assert.equal(globalRegistry.getSingleMetric('kvmq_messages_handled_total'), undefined, 'nothing global');
    });

    storeTest(fixture, 'every queue of the store, when no list is given', async (h) => {
      const queue = h.queue('every');
      await h.client.enqueue(queue, 'x');
      const registry = await h.client.metrics();
      const e = await scrape(registry);
      const listed = await h.client.queues().then(
        () => true,
        () => false,
      );
      if (listed) {
        assert.equal(e.value('kvmq_queue_messages', { queue, state: 'queued' }), 1);
      } else {
        // A store that cannot list its queues yet: the failure is counted and the scrape still answers.
        assert.equal(e.value('kvmq_queue_read_errors_total', { queue: '*' }), 1);
        assert.deepEqual(e.series('kvmq_queue_messages'), []);
      }
    });

    storeTest(fixture, 'metrics() refuses a bad queue list or an unknown option with a TypeError', async (h) => {
      await assert.rejects(h.client.metrics({ queues: ['bad name'] }), /queue name "bad name" is invalid/);
      await assert.rejects(h.client.metrics({ queues: 'q' as unknown as string[] }), /array of queue names/);
      await assert.rejects(h.client.metrics({ queue: ['q'] } as never), TypeError);
    });
  });
}
