/**
 * Queue events (config `events: true`), the queue listing and turns: what every store writes with each
 * transition, how readers page through it and fall behind its retention, `client.events()` and
 * `client.waitFor()` across clients, `queues()` and `takeTurn`.
 *
 * Nothing here asserts timing: a store whose notifications are slower still gets there.
 */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { EventsMissedError, KvmqError, type Client, type StoredEvent } from '../../src/index.js';
import { claimAndVanish, claimOne } from '../support/claims.js';
import { storeTest, type Harness } from '../support/harness.js';
import { JobLog, waitForStatus } from '../support/jobs.js';
import { gate, quietPeriod, waitFor, within } from '../support/wait.js';
import type { StoreFixture } from '../support/fixture.js';
import { storeOf } from '../../src/client/client-store.js';

const LONG_MS = 60_000;

type Row = [type: string, attempt: number, error?: string];

/** Every event kept for the queue, oldest first, read in pages. */
async function allEvents(client: Client, queue: string, limit = 1000): Promise<StoredEvent[]> {
  const events: StoredEvent[] = [];
  let after: string | undefined;
  for (;;) {
    const page = await client.readEvents(queue, after === undefined ? { limit } : { after, limit });
    assert.equal(page.missed, false, 'a reader from the oldest kept never missed anything');
    events.push(...page.events);
    if (page.events.length < limit) return events;
    after = page.cursor;
  }
}

/** The events of one message as [type, attempt, error?] rows, oldest first. */
async function rowsOf(client: Client, queue: string, id: string): Promise<Row[]> {
  return (await allEvents(client, queue))
    .filter((e) => e.id === id)
    .map((e): Row => (e.error === undefined ? [e.type, e.attempt] : [e.type, e.attempt, e.error]));
}

/** Waits until the message's events end with `type`, and returns them all. */
async function rowsUntil(client: Client, queue: string, id: string, type: string): Promise<Row[]> {
  let rows: Row[] = [];
  await waitFor(
    async () => {
      rows = await rowsOf(client, queue, id);
      return rows.at(-1)?.[0] === type;
    },
    { timeoutMs: 10_000, what: () => `${id}'s events to end with ${type} (have ${JSON.stringify(rows)})` },
  );
  return rows;
}

async function eventsQueue(
  h: Harness,
  label: string,
  config: Parameters<Client['configure']>[1] = {},
): Promise<string> {
  const q = h.queue(label);
  await h.client.configure(q, { events: true, ...config });
  return q;
}

/** Forces GC until the queue keeps at most `max` events (another GC may hold the queue's GC lock a moment). */
async function trimTo(h: Harness, queue: string, max: number): Promise<StoredEvent[]> {
  let kept: StoredEvent[] = [];
  await waitFor(
    async () => {
      await h.client.gc(queue);
      kept = await allEvents(h.client, queue);
      return kept.length <= max;
    },
    { timeoutMs: 10_000, what: () => `GC to trim the events to ${max} (have ${kept.length})` },
  );
  return kept;
}

/** Collects events from an iterator until `stop` says so; the loop's break must end it cleanly. */
async function collect(
  events: AsyncIterable<StoredEvent>,
  stop: (seen: StoredEvent[]) => boolean,
): Promise<StoredEvent[]> {
  const seen: StoredEvent[] = [];
  for await (const event of events) {
    seen.push(event);
    if (stop(seen)) break;
  }
  return seen;
}

export function queueEvents(fixture: StoreFixture): void {
  void describe('queue events, queues and turns', () => {
    storeTest(fixture, 'events are off by default; turned on, transitions write them', async (h) => {
      const q = h.queue('events-off');
      assert.equal((await h.client.config(q)).events, false);
      h.worker(q, () => undefined);
      await h.client.enqueue(q, 'x', { id: 'quiet' });
      await waitForStatus(h.client, q, 'quiet', 'done-awaiting-gc');
      assert.deepEqual(await allEvents(h.client, q), [], 'nothing is written while events are off');
      const head = await storeOf(h.client).eventsHead(q);
      assert.equal(typeof head, 'string');

      assert.equal((await h.client.configure(q, { events: true })).events, true);
      assert.equal((await h.client.config(q)).events, true);
      // The flag takes effect within the store's configuration refresh: a later message gets its full story.
      let n = 0;
      await waitFor(
        async () => {
          n += 1;
          const id = `loud-${n}`;
          await h.client.enqueue(q, 'x', { id });
          await waitForStatus(h.client, q, id, 'done-awaiting-gc');
          const rows = await rowsOf(h.client, q, id);
          return rows.length === 3 && rows;
        },
        { timeoutMs: 15_000, intervalMs: 100, what: 'a message with enqueued, started and completed events' },
      );
      const last = `loud-${n}`;
      assert.deepEqual(await rowsOf(h.client, q, last), [
        ['enqueued', 0],
        ['started', 1],
        ['completed', 1],
      ]);
      assert.deepEqual(await rowsOf(h.client, q, 'quiet'), [], 'nothing was written for the earlier message');
      const page = await h.client.readEvents(q, { after: head });
      assert.ok(page.events.length > 0, 'reading after the earlier head finds the new events');
    });

    storeTest(fixture, 'each transition writes its type, attempt and error, in order', async (h) => {
      const q = await eventsQueue(h, 'transitions');
      const failing = gate();
      h.worker(q, (job) => {
        if (job.id === 'flaky' && job.attempt === 1) return { status: 'retry', backoffMs: 0, error: 'again' };
        if (job.id === 'bad' && !failing.isOpen) return { status: 'error', error: 'boom' };
        return undefined;
      });
      await h.client.enqueue(q, 'x', { id: 'ok' });
      await h.client.enqueue(q, 'x', { id: 'flaky' });
      await h.client.enqueue(q, 'x', { id: 'bad' });
      await h.client.enqueue(q, 'x', { id: 'gone', initialBackoffMs: LONG_MS });

      assert.deepEqual(await rowsUntil(h.client, q, 'ok', 'completed'), [
        ['enqueued', 0],
        ['started', 1],
        ['completed', 1],
      ]);
      assert.deepEqual(await rowsUntil(h.client, q, 'flaky', 'completed'), [
        ['enqueued', 0],
        ['started', 1],
        ['retrying', 1, 'again'],
        ['started', 2],
        ['completed', 2],
      ]);
      assert.deepEqual(await rowsUntil(h.client, q, 'bad', 'failed'), [
        ['enqueued', 0],
        ['started', 1],
        ['failed', 1, 'boom'],
      ]);
      await waitForStatus(h.client, q, 'bad', 'failed');
      failing.open();
      assert.equal((await h.client.retry(q, 'bad')).ok, true);
      assert.deepEqual((await rowsUntil(h.client, q, 'bad', 'completed')).slice(3), [
        ['enqueued', 0],
        ['started', 1],
        ['completed', 1],
      ]);

      assert.equal((await h.client.remove(q, 'gone')).ok, true);
      assert.deepEqual(await rowsOf(h.client, q, 'gone'), [
        ['enqueued', 0],
        ['removed', 0],
      ]);

      // A finished message enqueued again is revived: enqueued, then handled again.
      await waitForStatus(h.client, q, 'ok', 'done-awaiting-gc');
      assert.deepEqual(await h.client.enqueue(q, 'again', { id: 'ok' }), { ok: true, id: 'ok', action: 'revived' });
      const revived = (await rowsUntil(h.client, q, 'ok', 'completed')).slice(3);
      assert.deepEqual(
        revived.map(([type]) => type),
        ['enqueued', 'started', 'completed'],
      );

      const all = await allEvents(h.client, q);
      const start = Date.now();
      for (const event of all) {
        assert.ok(event.at > start - 10 * LONG_MS && event.at <= start + LONG_MS, `at is ms since the epoch`);
        assert.equal(typeof event.cursor, 'string');
      }
      assert.equal(new Set(all.map((e) => e.cursor)).size, all.length, 'every event has its own cursor');
    });

    storeTest(fixture, 'retryFailed writes enqueued for each message it redrives', async (h) => {
      const q = await eventsQueue(h, 'redrive');
      const worker = h.worker(q, () => ({ status: 'error', error: 'down' }));
      await h.client.enqueueBatch(q, [
        { payload: 1, id: 'r1' },
        { payload: 2, id: 'r2' },
      ]);
      await waitForStatus(h.client, q, 'r1', 'failed');
      await waitForStatus(h.client, q, 'r2', 'failed');
      await worker.stop();
      assert.deepEqual(await h.client.retryFailed(q), { retried: 2 });
      for (const id of ['r1', 'r2']) {
        assert.deepEqual(await rowsOf(h.client, q, id), [
          ['enqueued', 0],
          ['started', 1],
          ['failed', 1, 'down'],
          ['enqueued', 0],
        ]);
      }
    });

    storeTest(fixture, "a give-back of an unrun message writes no retrying; a handler's retry does", async (h) => {
      const q = await eventsQueue(h, 'give-back');
      await h.client.enqueue(q, 'x', { id: 'm' });
      const consumerId = 'hands-back';
      const claimed = await claimOne(h, q, consumerId, LONG_MS);
      const back = { id: 'm', attempt: claimed.attempt, outcome: 'retry', backoffMs: 0, error: null } as const;
      assert.deepEqual(await storeOf(h.client).finish(q, consumerId, [{ ...back, startedAt: null }]), ['ok']);
      assert.deepEqual(await rowsUntil(h.client, q, 'm', 'started'), [
        ['enqueued', 0],
        ['started', 1],
      ]);
      const log = new JobLog();
      h.worker(q, (job) => {
        log.record(job);
        return log.seen.length === 1 ? { status: 'retry', backoffMs: 0 } : undefined;
      });
      const rows = await rowsUntil(h.client, q, 'm', 'completed');
      assert.deepEqual(
        rows.map(([type]) => type),
        ['enqueued', 'started', 'started', 'retrying', 'started', 'completed'],
      );
      assert.equal(rows[3]?.length, 2, 'a retry without an error has none');
    });

    storeTest(fixture, 'maxDeliveries failing a message at a claim writes failed', async (h) => {
      const q = await eventsQueue(h, 'poison', { maxDeliveries: 1 });
      await h.client.enqueue(q, 'x', { id: 'm' });
      await claimAndVanish(h, q, 'vanished');
      await waitForStatus(h.client, q, 'm', 'queued', { timeoutMs: 10_000 });
      h.worker(q, () => undefined);
      await waitForStatus(h.client, q, 'm', 'failed', { timeoutMs: 10_000 });
      const rows = await rowsUntil(h.client, q, 'm', 'failed');
      assert.deepEqual(
        rows.map(([type, attempt]) => [type, attempt]),
        [
          ['enqueued', 0],
          ['started', 1],
          ['failed', 1],
        ],
      );
      assert.match(rows[2]?.[2] ?? '', /lost its lock 1 time/);
    });

    storeTest(fixture, 'a dead-letter move writes failed in the source queue', async (h) => {
      if (!storeOf(h.client).capabilities.deadLetterQueue) return;
      const dlq = h.queue('dead');
      const q = await eventsQueue(h, 'dlq-source', { deadLetterQueue: dlq });
      h.worker(q, () => ({ status: 'error', error: 'cannot' }));
      await h.client.enqueue(q, 'x', { id: 'm' });
      await waitForStatus(h.client, dlq, 'm', 'queued');
      assert.deepEqual(await rowsUntil(h.client, q, 'm', 'failed'), [
        ['enqueued', 0],
        ['started', 1],
        ['failed', 1, 'cannot'],
      ]);
      const result = await h.client.waitFor(q, 'm', { timeoutMs: 10_000 });
      assert.equal(result.outcome, 'failed');
      assert.equal(result.error, 'cannot');
    });

    storeTest(fixture, 'pages follow cursors: limit kept, nothing skipped or repeated, across clients', async (h) => {
      const q = await eventsQueue(h, 'paging');
      const other = await h.connect();
      const ids = Array.from({ length: 23 }, (_, i) => `m${String(i).padStart(2, '0')}`);
      for (const id of ids) await h.client.enqueue(q, 'x', { id });

      const seen: StoredEvent[] = [];
      let after: string | undefined;
      for (let turn = 0; turn < 20; turn += 1) {
        const reader = turn % 2 === 0 ? h.client : other;
        const page = await reader.readEvents(q, after === undefined ? { limit: 5 } : { after, limit: 5 });
        assert.equal(page.missed, false);
        assert.ok(page.events.length <= 5, `a page holds at most the limit, not ${page.events.length}`);
        if (page.events.length > 0) assert.equal(page.cursor, page.events.at(-1)?.cursor);
        else assert.equal(page.cursor, after, 'an empty page keeps the cursor');
        seen.push(...page.events);
        after = page.cursor;
        if (page.events.length === 0) break;
      }
      assert.deepEqual(
        seen.map((e) => [e.type, e.id]),
        ids.map((id) => ['enqueued', id]),
      );

      // Any event's cursor reads on exactly after it.
      const middle = seen[10];
      assert.ok(middle !== undefined);
      const rest = await other.readEvents(q, { after: middle.cursor, limit: 100 });
      assert.deepEqual(
        rest.events.map((e) => e.id),
        ids.slice(11),
      );
    });

    storeTest(fixture, 'eventsHead: reading after it returns only later events', async (h) => {
      const q = await eventsQueue(h, 'head');
      const empty = await h.client.readEvents(q);
      assert.deepEqual(empty, { events: [], missed: false, cursor: empty.cursor });
      const head0 = await storeOf(h.client).eventsHead(q);
      assert.deepEqual((await h.client.readEvents(q, { after: head0 })).events, []);

      await h.client.enqueueBatch(q, [
        { payload: 1, id: 'a' },
        { payload: 2, id: 'b' },
      ]);
      const head1 = await storeOf(h.client).eventsHead(q);
      assert.deepEqual((await h.client.readEvents(q, { after: head1 })).events, []);
      await h.client.enqueue(q, 3, { id: 'c' });

      const fromEmpty = await h.client.readEvents(q, { after: empty.cursor });
      assert.deepEqual(
        fromEmpty.events.map((e) => e.id),
        ['a', 'b', 'c'],
        'the cursor of an empty first page reads what came later',
      );
      const fromHead0 = await h.client.readEvents(q, { after: head0 });
      assert.deepEqual(
        fromHead0.events.map((e) => e.id),
        ['a', 'b', 'c'],
      );
      const fromHead1 = await h.client.readEvents(q, { after: head1 });
      assert.deepEqual(
        fromHead1.events.map((e) => e.id),
        ['c'],
      );
      assert.equal(await storeOf(h.client).eventsHead(q), fromHead1.cursor);
    });

    storeTest(fixture, 'retention by count: GC keeps the newest; a reader behind is told it missed', async (h) => {
      const q = await eventsQueue(h, 'keep-count', { eventsMaxCount: 5 });
      const behind = await storeOf(h.client).eventsHead(q);
      const ids = Array.from({ length: 20 }, (_, i) => `m${String(i).padStart(2, '0')}`);
      for (const id of ids) await h.client.enqueue(q, 'x', { id });
      const keptUp = await storeOf(h.client).eventsHead(q);

      const kept = await trimTo(h, q, 5);
      assert.deepEqual(
        kept.map((e) => e.id),
        ids.slice(-5),
        'the newest events within the bound are kept',
      );

      const late = await h.client.readEvents(q, { after: behind, limit: 2 });
      assert.equal(late.missed, true, 'a reader whose next event was trimmed is told');
      assert.deepEqual(
        late.events.map((e) => e.id),
        ids.slice(15, 17),
        'the page starts with the oldest kept event',
      );
      const next = await h.client.readEvents(q, { after: late.cursor });
      assert.equal(next.missed, false, 'reading on from the page that told is not missed again');
      assert.deepEqual(
        next.events.map((e) => e.id),
        ids.slice(17),
      );

      const upToDate = await h.client.readEvents(q, { after: keptUp });
      assert.deepEqual(upToDate, { events: [], missed: false, cursor: keptUp }, 'a reader that kept up missed nothing');
      await h.client.enqueue(q, 'x', { id: 'later' });
      const fresh = await h.client.readEvents(q, { after: keptUp });
      assert.equal(fresh.missed, false);
      assert.deepEqual(
        fresh.events.map((e) => e.id),
        ['later'],
      );
    });

    storeTest(fixture, 'retention by age: GC trims old events; the reader is told', async (h) => {
      const q = await eventsQueue(h, 'keep-age', { eventsMaxAgeMs: 1 });
      const behind = await storeOf(h.client).eventsHead(q);
      await h.client.enqueueBatch(q, [
        { payload: 1, id: 'a' },
        { payload: 2, id: 'b' },
      ]);
      await trimTo(h, q, 0);
      const late = await h.client.readEvents(q, { after: behind });
      assert.equal(late.missed, true);
      assert.deepEqual(late.events, []);
      // Read on from where the store says, as a reader told of the gap does: not missed again.
      const on = await h.client.readEvents(q, { after: late.cursor });
      assert.equal(on.missed, false, 'reading on from the page that told is not missed again');
      assert.equal((await h.client.readEvents(q)).missed, false, 'reading from the oldest kept never misses');
    });

    storeTest(fixture, 'bad cursors and options are TypeErrors that say what is allowed', async (h) => {
      const q = await eventsQueue(h, 'bad-input');
      await h.client.enqueue(q, 'x', { id: 'm' });
      await assert.rejects(h.client.readEvents(q, { after: 'zz:not a cursor!' }), TypeError);
      await assert.rejects(h.client.readEvents(q, { after: '' }), /cursor/);
      await assert.rejects(h.client.readEvents(q, { limit: 0 }), /limit must be a whole number from 1/);
      await assert.rejects(h.client.readEvents(q, { bogus: 1 } as never), /unknown option 'bogus'/);
      await assert.rejects(h.client.readEvents('bad queue!'), TypeError);

      assert.throws(() => h.client.events(q, { after: 5 as never }), /after must be 'start', 'now' or an event cursor/);
      assert.throws(() => h.client.events(q, { bogus: true } as never), /unknown option 'bogus'/);
      assert.throws(() => h.client.events(q, { signal: 'no' as never }), /signal must be an AbortSignal/);
      assert.throws(() => h.client.events('bad queue!'), TypeError);
      await assert.rejects(
        collect(h.client.events(q, { after: 'zz:not a cursor!' }), () => true),
        TypeError,
      );

      await assert.rejects(h.client.waitFor(q, 'm', { timeoutMs: 0 }), /timeoutMs must be a whole number/);
      await assert.rejects(h.client.waitFor(q, 'm', { timeoutMs: 1.5 }), /timeoutMs/);
      await assert.rejects(h.client.waitFor(q, 'bad id!'), /message id/);
      await assert.rejects(h.client.waitFor(q, 'm', { wait: 1 } as never), /unknown option 'wait'/);
    });

    storeTest(fixture, "events() on one client sees another client's worker live", async (h) => {
      const q = await eventsQueue(h, 'live');
      const consumer = await h.connect();
      const producer = await h.connect();
      // 'start' on a new queue: the reader waits before anything exists, then sees it arrive.
      const reading = collect(consumer.events(q, { after: 'start' }), (seen) =>
        seen.some((e) => e.id === 'm' && e.type === 'completed'),
      );
      await quietPeriod(100);
      h.worker(q, () => undefined, {}, producer);
      await producer.enqueue(q, 'x', { id: 'm' });
      const seen = await within(20_000, reading, 'the consumer to see the message complete');
      assert.deepEqual(
        seen.filter((e) => e.id === 'm').map((e) => e.type),
        ['enqueued', 'started', 'completed'],
      );
    });

    storeTest(fixture, "events() from 'now' skips what came before; signal and close end it", async (h) => {
      const q = await eventsQueue(h, 'now');
      await h.client.enqueue(q, 'x', { id: 'before' });
      const iterator = h.client.events(q)[Symbol.asyncIterator]();
      const first = iterator.next();
      // The first event after the call, whenever the reader got going: keep writing until it arrives.
      let n = 0;
      const event = await waitFor(
        async () => {
          n += 1;
          await h.client.enqueue(q, 'x', { id: `after-${n}` });
          return Promise.race([first, quietPeriod(50).then(() => null)]);
        },
        { timeoutMs: 15_000, intervalMs: 0, what: 'the reader to see an event' },
      );
      assert.equal(event.done, false);
      assert.match(event.value.id, /^after-/, 'the event before the call is not read');
      await iterator.return?.();

      const controller = new AbortController();
      // Aborted once it read what was there (not after a fixed time: a loaded machine reads slowly).
      const readTwo = gate();
      const aborted = collect(h.client.events(q, { after: 'start', signal: controller.signal }), (seen) => {
        if (seen.length >= 2) readTwo.open();
        return false;
      });
      await within(10_000, readTwo.opened, 'the reader to read what was there');
      controller.abort();
      const seenBeforeAbort = await within(10_000, aborted, 'an aborted reader to end');
      assert.ok(seenBeforeAbort.length >= 2, 'it read what was there');

      const closing = await h.connect();
      const reading = collect(closing.events(q), () => false);
      await quietPeriod(100);
      await closing.close();
      await within(10_000, reading, 'a reader to end when its client closes');
    });

    storeTest(fixture, 'events() throws EventsMissedError with the oldest kept events', async (h) => {
      const q = await eventsQueue(h, 'missed', { eventsMaxCount: 3 });
      const behind = await storeOf(h.client).eventsHead(q);
      const ids = ['a', 'b', 'c', 'd', 'e', 'f', 'g'];
      for (const id of ids) await h.client.enqueue(q, 'x', { id });
      await trimTo(h, q, 3);
      const error = await collect(h.client.events(q, { after: behind }), () => true).then(
        () => assert.fail('the reader was not told'),
        (e: unknown) => e,
      );
      assert.ok(error instanceof EventsMissedError, String(error));
      assert.equal(error.code, 'EVENTS_MISSED');
      assert.deepEqual(
        error.events.map((e) => e.id),
        ['e', 'f', 'g'],
      );
      await h.client.enqueue(q, 'x', { id: 'h' });
      const resumed = await collect(h.client.events(q, { after: error.cursor }), () => true);
      assert.deepEqual(
        resumed.map((e) => e.id),
        ['h'],
      );
    });

    for (const events of [false, true]) {
      storeTest(fixture, `waitFor resolves with the final outcome (events ${events ? 'on' : 'off'})`, async (h) => {
        const q = h.queue('wait');
        await h.client.configure(q, { events });
        await h.client.enqueue(q, 'x', { id: 'good' });
        await h.client.enqueue(q, 'x', { id: 'bad' });
        await h.client.enqueue(q, 'x', { id: 'later', initialBackoffMs: LONG_MS });
        const waiter = await h.connect();
        const good = waiter.waitFor(q, 'good', { timeoutMs: 20_000 });
        const bad = waiter.waitFor(q, 'bad', { timeoutMs: 20_000 });
        h.worker(q, (job) => (job.id === 'bad' ? { status: 'error', error: 'nope' } : undefined));

        const completed = await good;
        assert.equal(completed.outcome, 'completed');
        assert.equal(completed.attempt, 1);
        assert.equal(completed.error, null);
        assert.equal(completed.status?.state, 'done-awaiting-gc');
        const failed = await bad;
        assert.equal(failed.outcome, 'failed');
        assert.equal(failed.error, 'nope');
        assert.equal(failed.status?.state, 'failed');
        assert.equal((await waiter.waitFor(q, 'good')).outcome, 'completed', 'a finished message answers at once');

        await assert.rejects(waiter.waitFor(q, 'later', { timeoutMs: 200 }), (error: unknown) => {
          assert.ok(error instanceof KvmqError);
          assert.equal(error.code, 'TIMEOUT');
          assert.match(error.message, /later.*within 200 ms/);
          return true;
        });
        await assert.rejects(waiter.waitFor(q, 'never'), (error: unknown) => {
          assert.ok(error instanceof KvmqError);
          assert.equal(error.code, 'MESSAGE_GONE');
          return true;
        });
        const closing = await h.connect();
        const pending = closing.waitFor(q, 'later', { timeoutMs: LONG_MS });
        await quietPeriod(200);
        // Attached before the close, whose round trips would otherwise leave the rejection unhandled a moment.
        const rejected = assert.rejects(pending, { code: 'CLOSED' });
        await closing.close();
        await rejected;
      });
    }

    storeTest(fixture, 'queues() lists configured queues and queues with messages, sorted', async (h) => {
      const configured = h.queue('b-configured');
      const withMessages = h.queue('a-messages');
      assert.deepEqual(await h.client.queues(), []);
      await h.client.configure(configured, { events: true });
      await h.client.enqueue(withMessages, 'x');
      assert.deepEqual(await h.client.queues(), [withMessages, configured]);
      const other = await h.connect();
      assert.deepEqual(await other.queues(), [withMessages, configured]);
    });

    storeTest(fixture, 'takeTurn: one caller per window across clients; again after it; names apart', async (h) => {
      const q = h.queue('turns');
      const other = await h.connect();
      const tries = await Promise.all(
        Array.from({ length: 10 }, (_, i) => storeOf(i % 2 === 0 ? h.client : other).takeTurn(q, 'warn', LONG_MS)),
      );
      assert.equal(tries.filter(Boolean).length, 1, `exactly one turn in the window, got ${JSON.stringify(tries)}`);
      assert.equal(await storeOf(other).takeTurn(q, 'warn', LONG_MS), false);
      assert.equal(await storeOf(h.client).takeTurn(q, 'other-name', LONG_MS), true, 'another name is apart');
      assert.equal(
        await storeOf(h.client).takeTurn(h.queue('other-queue'), 'warn', LONG_MS),
        true,
        'another queue too',
      );

      assert.equal(await storeOf(h.client).takeTurn(q, 'short', 200), true);
      await waitFor(() => storeOf(other).takeTurn(q, 'short', 200), {
        timeoutMs: 10_000,
        intervalMs: 50,
        what: 'the turn to come again after its window',
      });
    });
  });
}
