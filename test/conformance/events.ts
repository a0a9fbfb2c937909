/** Worker events: completed, retrying, failed and stalled, each told once the store holds what it says. */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { storeTest, type Harness } from '../support/harness.js';
import { JobLog } from '../support/jobs.js';
import { quietPeriod, waitFor } from '../support/wait.js';
import type { CompletedEvent, MessageStatus, Worker, WorkerEvents } from '../../src/index.js';
import type { StoreFixture } from '../support/fixture.js';

type OutcomeEventName = 'completed' | 'retrying' | 'failed' | 'stalled';

interface Heard {
  readonly name: OutcomeEventName;
  readonly event: WorkerEvents[OutcomeEventName][0];
  /** The message's status, read once the event was heard. */
  readonly status: Promise<MessageStatus | null>;
}

/** Records the worker's outcome events, with the message's status as read right after each one. */
function listen(h: Harness, q: string, worker: Worker): Heard[] {
  const heard: Heard[] = [];
  for (const name of ['completed', 'retrying', 'failed', 'stalled'] as const) {
    worker.on(name, (event: WorkerEvents[OutcomeEventName][0]) => {
      heard.push({ name, event, status: h.client.status(q, event.id) });
    });
  }
  return heard;
}

/** `name id#attempt`, plus the reason of a retrying or failed event. */
function describeHeard({ name, event }: Heard): string {
  const reason = 'reason' in event ? ` ${event.reason}` : '';
  return `${name} ${event.id}#${event.attempt}${reason}`;
}

// Long enough that a status read right after `retrying` still finds the message waiting.
const RETRY_BACKOFF_MS = 400;

export function events(fixture: StoreFixture): void {
  void describe('worker events', () => {
    storeTest(fixture, 'completed, retrying and failed come in order, once the store holds the outcome', async (h) => {
      const q = h.queue('events');
      const worker = h.worker(
        q,
        (job) => {
          if (job.id === 'error') return { status: 'error', error: 'bad input' };
          if (job.id === 'retry' && job.attempt === 1) return { status: 'retry', backoffMs: RETRY_BACKOFF_MS };
          if (job.id === 'throw') throw new Error('boom');
          return undefined;
        },
        { maxAttempts: 2, retryBackoffMs: RETRY_BACKOFF_MS },
      );
      const heard = listen(h, q, worker);
      await h.client.enqueueBatch(q, [
        { payload: 1, id: 'ok' },
        { payload: 2, id: 'error' },
        { payload: 3, id: 'retry' },
        { payload: 4, id: 'throw' },
      ]);
      await waitFor(() => heard.length >= 6, { what: () => `6 events (heard ${heard.map(describeHeard).join(', ')})` });
      await quietPeriod(100);

      const of = (id: string): string[] => heard.filter((e) => e.event.id === id).map(describeHeard);
      assert.deepEqual(of('ok'), ['completed ok#1']);
      assert.deepEqual(of('error'), ['failed error#1 handler']);
      assert.deepEqual(of('retry'), ['retrying retry#1 handler', 'completed retry#2']);
      assert.deepEqual(of('throw'), ['retrying throw#1 thrown', 'failed throw#2 thrown']);
      assert.equal(heard.length, 6);

      for (const { name, event, status } of heard) {
        assert.equal(event.queue, q);
        assert.ok('durationMs' in event && event.durationMs >= 0, `${name} carries durationMs`);
        const stored = await status;
        assert.ok(stored !== null, `${event.id} exists`);
        if (name === 'retrying') {
          assert.ok('backoffMs' in event);
          assert.equal(event.backoffMs, RETRY_BACKOFF_MS);
          // Either still waiting out its backoff with the retry stored, or already on a later attempt.
          assert.ok(
            stored.attempt > event.attempt || (stored.state === 'queued-with-backoff' && stored.outcome === 'retry'),
            `after retrying ${event.id}#${event.attempt} the store shows ${JSON.stringify(stored)}`,
          );
        } else {
          assert.equal(stored.state, name === 'completed' ? 'done-awaiting-gc' : 'failed', `${name} ${event.id}`);
          assert.equal(stored.attempt, event.attempt);
          assert.equal(stored.outcome, name === 'completed' ? 'success' : 'error');
        }
      }
      const failed = heard.filter((e) => e.name === 'failed').map((e) => e.event);
      assert.ok(failed.every((e) => 'error' in e));
      assert.equal(failed.find((e) => e.id === 'error' && 'error' in e)?.error, 'bad input');
      const thrown = failed.find((e) => e.id === 'throw');
      assert.ok(thrown !== undefined && 'error' in thrown);
      assert.match(String(thrown.error), /^Error: boom/);
      assert.equal((await h.client.status(q, 'throw'))?.lastError, thrown.error);
    });

    storeTest(fixture, 'stalled: a lost lock is told once, and nothing of the lost attempt after it', async (h) => {
      const q = h.queue('stalled');
      const log = new JobLog();
      const worker = h.worker(
        q,
        async (job) => {
          await log.recordUntilAborted(job);
          return { status: 'success' };
        },
        { lockMs: 1000 },
      );
      const heard = listen(h, q, worker);
      await h.client.enqueue(q, 'x', { id: 'm' });
      const seen = await log.handled('m');
      await h.client.clear(q);
      await waitFor(() => heard.length > 0, { what: 'the stalled event' });
      await waitFor(() => worker.inFlight === 0, { what: 'the handler to end' });
      await quietPeriod(100);
      assert.deepEqual(heard.map(describeHeard), ['stalled m#1']);
      assert.deepEqual(heard[0]?.event, { queue: q, id: 'm', attempt: 1 });
      assert.equal(seen.job.signal.aborted, true);
    });

    storeTest(fixture, 'a listener that throws or rejects is a recovered error; the worker goes on', async (h) => {
      const q = h.queue('listener-throws');
      const worker = h.worker(q, () => undefined);
      const heardErrors: unknown[] = [];
      const completed: string[] = [];
      worker.on('error', (error) => heardErrors.push(error));
      worker.on('completed', ({ id }) => {
        if (id === 'a') throw new Error('listener broke on a');
      });
      const asyncListener = async ({ id }: CompletedEvent): Promise<void> => {
        await Promise.resolve();
        if (id === 'b') throw new Error('async listener broke on b');
      };
      // The very mistake the rule warns of: an async listener, whose rejection the worker must catch.
      // eslint-disable-next-line @typescript-eslint/no-misused-promises
      worker.on('completed', asyncListener);
      worker.on('completed', ({ id }) => completed.push(id));
      await h.client.enqueue(q, 'x', { id: 'a' });
      await h.client.enqueue(q, 'x', { id: 'b' });
      await h.client.enqueue(q, 'x', { id: 'c' });
      await waitFor(() => completed.includes('c') && heardErrors.length === 2, {
        what: () => `c completed and 2 errors (completed ${completed.join()}; ${heardErrors.length} errors)`,
      });
      assert.equal(worker.running, true);
      assert.deepEqual(heardErrors.map(String).sort(), [
        'Error: async listener broke on b',
        'Error: listener broke on a',
      ]);
      // onError hears them too.
      assert.deepEqual(h.errors.map(String).sort(), heardErrors.map(String).sort());
      h.errors.length = 0;
    });
  });
}
