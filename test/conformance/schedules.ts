/**
 * Repeatable schedules kept in the store: every slot enqueued exactly once however many schedulers run (the
 * store's compare-and-set in fireSchedule), catch-up after a downtime, replace, unschedule, bad input.
 */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { RESCAN_MS, Scheduler } from '../../src/schedule/scheduler.js';
import { slotMessageId, slotMessages } from '../../src/schedule/messages.js';
import { decodeBody } from '../../src/schedule/body.js';
import { storeTest, type Harness } from '../support/harness.js';
import { JobLog } from '../support/jobs.js';
import { quietPeriod, waitFor } from '../support/wait.js';
import type { Client, StoredEvent } from '../../src/index.js';
import type { StoredSchedule } from '../../src/stores/contract/contract.js';
import type { StoreFixture } from '../support/fixture.js';
import { storeOf } from '../../src/client/client-store.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
// `<name>@<ISO 8601>`: the slot a message was enqueued for.
const SLOT_ID = /^(?<name>[A-Za-z0-9_.-]+)@(?<iso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)$/;

function slotOf(id: string): number {
  const match = SLOT_ID.exec(id);
  assert.ok(match?.groups, `message id ${id} is <name>@<ISO slot>`);
  return Date.parse(match.groups.iso ?? '');
}

async function storedSchedule(client: Client, queue: string, name: string): Promise<StoredSchedule> {
  const found = (await storeOf(client).schedules(queue)).find((s) => s.name === name);
  assert.ok(found, `schedule ${name} is stored`);
  return found;
}

async function enqueuedEvents(client: Client, queue: string): Promise<StoredEvent[]> {
  const page = await client.readEvents(queue, { limit: 10_000 });
  return page.events.filter((e) => e.type === 'enqueued');
}

function reportTo(h: Harness): (error: unknown) => void {
  return (error) => h.errors.push(error);
}

export function schedules(fixture: StoreFixture): void {
  void describe('schedules', () => {
    storeTest(
      fixture,
      'schedule: a 1-second everyMs schedule fires into the queue and a worker handles it',
      async (h) => {
        const q = h.queue('every');
        // The worker runs first: a schedule made on its client is read at once, not at the next rescan.
        const log = new JobLog();
        h.worker(q, (job) => log.record(job));
        await waitFor(async () => (await h.client.queueStatus(q)).consumers.length === 1, { what: 'the worker' });
        // Past its first read of the (empty) schedules; on a slow machine the check is only weaker.
        await quietPeriod(300);
        const before = Date.now();
        const { created, schedule } = await h.client.schedule(q, 'tick', { everyMs: 1000 }, { n: 1 });
        assert.equal(created, true);
        assert.equal(schedule.nextAt % 1000, 0, 'slots are multiples of everyMs since the epoch');
        assert.ok(schedule.nextAt > before && schedule.nextAt <= Date.now() + 1000, 'the first slot is the next one');
        await log.count(2, { timeoutMs: 10_000 });
        const [first, second] = log.seen;
        assert.ok(first && second);
        assert.deepEqual(first.payload, { n: 1 });
        assert.equal(first.id, slotMessageId('tick', schedule.nextAt), 'the first message is the first slot');
        assert.equal(slotOf(second.id) - slotOf(first.id), 1000, 'then the next slot, none skipped');
        assert.ok(first.at >= schedule.nextAt, 'a slot is enqueued once it is due, not before');
        assert.equal(await h.client.unschedule(q, 'tick'), true);
      },
    );

    storeTest(fixture, 'schedule: concurrent fireSchedule calls with the same expected record: one wins', async (h) => {
      const q = h.queue('cas');
      await h.client.schedule(q, 'once', { everyMs: HOUR }, 'x');
      const expected = await storedSchedule(h.client, q, 'once');
      const messages = slotMessages('once', decodeBody('once', expected.body), [expected.nextAt]);
      const others = await Promise.all([h.connect(), h.connect()]);
      const stores = [h.client, ...others].map((client) => storeOf(client));
      const results = await Promise.all(
        Array.from({ length: 9 }, (_, i) =>
          (stores[i % stores.length] ?? storeOf(h.client)).fireSchedule(q, expected, expected.nextAt + HOUR, messages),
        ),
      );
      const winners = results.filter((r) => r !== null);
      assert.equal(winners.length, 1, 'exactly one firing succeeds');
      assert.deepEqual(winners[0], [{ ok: true, id: messages[0]?.id, action: 'added' }]);
      assert.equal((await h.client.queueStatus(q)).total, 1);
      assert.equal((await storedSchedule(h.client, q, 'once')).nextAt, expected.nextAt + HOUR);

      // A stale record (fired already, or another body) writes nothing.
      const later = slotMessages('once', decodeBody('once', expected.body), [expected.nextAt + HOUR]);
      assert.equal(await storeOf(h.client).fireSchedule(q, expected, expected.nextAt + 2 * HOUR, later), null);
      const current = await storedSchedule(h.client, q, 'once');
      const otherBody = { ...current, body: `${current.body} ` };
      assert.equal(await storeOf(h.client).fireSchedule(q, otherBody, current.nextAt + HOUR, later), null);
      assert.equal(
        await storeOf(h.client).fireSchedule(q, { ...current, name: 'gone' }, current.nextAt + HOUR, later),
        null,
      );
      assert.equal((await h.client.queueStatus(q)).total, 1, 'a failed compare enqueues nothing');
      assert.equal((await storedSchedule(h.client, q, 'once')).nextAt, expected.nextAt + HOUR, 'and moves nothing');
    });

    storeTest(
      fixture,
      "schedule: three clients' schedulers enqueue each slot once",
      async (h) => {
        const q = h.queue('many');
        await h.client.configure(q, { events: true, gcLifetimeMs: 0 });
        const log = new JobLog();
        const clients = [h.client, await h.connect(), await h.connect()];
        for (const client of clients) h.worker(q, (job) => log.record(job), {}, client);
        await h.client.schedule(q, 'sec', { cron: '* * * * * *' }, 'beat');
        await log.count(3, { timeoutMs: 15_000 });
        assert.equal(await h.client.unschedule(q, 'sec'), true);
        const ids = log.ids();
        assert.equal(new Set(ids).size, ids.length, `no slot handled twice: ${JSON.stringify(ids)}`);
        const slots = ids.map(slotOf).sort((a, b) => a - b);
        for (let i = 1; i < slots.length; i += 1) assert.equal((slots[i] ?? 0) - (slots[i - 1] ?? 0), 1000);
        const events = await enqueuedEvents(h.client, q);
        const perId = new Map<string, number>();
        for (const event of events) perId.set(event.id, (perId.get(event.id) ?? 0) + 1);
        for (const [id, count] of perId) assert.equal(count, 1, `${id} enqueued once`);
      },
      { timeoutMs: 40_000 },
    );

    storeTest(
      fixture,
      'schedule: after a downtime the latest catchUp slots are enqueued, then it goes on',
      async (h) => {
        const q = h.queue('catchup');
        const client = h.client;
        await client.schedule(q, 'three', { everyMs: MINUTE }, 'c', { catchUp: 3 });
        await client.schedule(q, 'one', { everyMs: MINUTE }, 'd');
        // Nothing ran for ten minutes: both schedules' next slots are far in the past.
        const now = Date.now();
        const past = Math.floor(now / MINUTE) * MINUTE - 10 * MINUTE;
        for (const name of ['three', 'one']) {
          const stored = await storedSchedule(client, q, name);
          assert.equal(await storeOf(client).putSchedule(q, { ...stored, nextAt: past }), false);
        }
        await new Scheduler(storeOf(client), q, reportTo(h)).pass();
        const after = await client.schedules(q);
        const next = after[0]?.nextAt ?? 0;
        assert.ok(next > now && next <= Date.now() + MINUTE, 'each goes on from its next slot');
        assert.deepEqual(
          after.map((s) => [s.name, s.nextAt]),
          [
            ['one', next],
            ['three', next],
          ],
        );
        const page = await client.list(q, { states: ['queued'] });
        const ids = page.messages.map((m) => m.id).sort();
        assert.deepEqual(ids, [
          slotMessageId('one', next - MINUTE),
          slotMessageId('three', next - 3 * MINUTE),
          slotMessageId('three', next - 2 * MINUTE),
          slotMessageId('three', next - MINUTE),
        ]);
        // A second pass finds nothing due.
        await new Scheduler(storeOf(client), q, reportTo(h)).pass();
        assert.equal((await client.queueStatus(q)).total, 4);
      },
    );

    storeTest(
      fixture,
      'schedule: unschedule stops it; messages it enqueued stay',
      async (h) => {
        const q = h.queue('unschedule');
        const log = new JobLog();
        h.worker(q, (job) => log.record(job));
        await h.client.schedule(q, 'tick', { everyMs: 1000 }, 'u');
        await log.count(1, { timeoutMs: 10_000 });
        assert.equal(await h.client.unschedule(q, 'tick'), true);
        assert.equal(await h.client.unschedule(q, 'tick'), false, 'a second removal finds nothing');
        assert.deepEqual(await h.client.schedules(q), []);
        const total = (await h.client.queueStatus(q)).total;
        assert.ok(total >= 1);
        await quietPeriod(2500);
        assert.equal((await h.client.queueStatus(q)).total, total, 'no slot fires after unschedule');
      },
      { timeoutMs: 40_000 },
    );

    storeTest(fixture, 'schedule: replacing changes timing, payload and options; schedules() lists it', async (h) => {
      const q = h.queue('replace');
      await h.client.configure(q, { filterEnums: { size: ['s', 'm'] } });
      const first = await h.client.schedule(q, 'job', { everyMs: HOUR }, 'old');
      assert.equal(first.created, true);
      const replaced = await h.client.schedule(
        q,
        'job',
        { cron: '0 0 1 1 *', tz: 'Europe/Berlin' },
        { v: 'new' },
        { catchUp: 5, metadata: { by: 'cron' }, filters: { size: 'm' }, attempts: 3 },
      );
      assert.equal(replaced.created, false);
      const listed = await h.client.schedules(q);
      assert.equal(listed.length, 1);
      const [info] = listed;
      assert.ok(info);
      const newYear = new Date().getUTCFullYear() + 1;
      // Midnight of 1 January in Berlin is 23:00 UTC the day before (CET, UTC+1).
      assert.equal(info.nextAt, Date.UTC(newYear - 1, 11, 31, 23));
      assert.deepEqual(
        { ...info, nextAt: 0 },
        {
          name: 'job',
          cron: '0 0 1 1 *',
          tz: 'Europe/Berlin',
          catchUp: 5,
          nextAt: 0,
          payload: { v: 'new' },
          metadata: { by: 'cron' },
          filters: { size: 'm' },
          priority: 0,
          group: null,
          attempts: 3,
        },
      );

      // Replaced again with a fast timing: the slots carry the new payload and options.
      await h.client.schedule(q, 'job', { everyMs: 1000 }, 'fast', {
        metadata: { by: 'every' },
        filters: { size: 's' },
        priority: 7,
        group: 'g1',
        timeoutMs: 5000,
      });
      const log = new JobLog();
      h.worker(q, (job) => log.record(job));
      await log.count(1, { timeoutMs: 10_000 });
      const [seen] = log.seen;
      assert.ok(seen);
      assert.equal(seen.payload, 'fast');
      assert.deepEqual(seen.job.metadata, { by: 'every' });
      assert.deepEqual(seen.job.filters, { size: 's' });
      assert.equal(await h.client.unschedule(q, 'job'), true);
      // Enqueued as enqueue would: the store keeps its priority, group and policy.
      const details = await h.client.show(q, seen.id);
      assert.ok(details);
      assert.deepEqual([details.priority, details.group, details.policy], [7, 'g1', { timeoutMs: 5000 }]);
    });

    storeTest(fixture, 'schedule: clear removes messages but keeps schedules', async (h) => {
      const q = h.queue('clear');
      await h.client.schedule(q, 'kept', { everyMs: HOUR }, 1);
      await h.client.enqueue(q, 'm');
      await h.client.clear(q);
      assert.equal((await h.client.queueStatus(q)).total, 0);
      assert.deepEqual(
        (await h.client.schedules(q)).map((s) => s.name),
        ['kept'],
      );
    });

    storeTest(
      fixture,
      'schedule: bad input is a TypeError that says what is allowed, and writes nothing',
      async (h) => {
        const q = h.queue('bad');
        const bad: [string, () => Promise<unknown>, RegExp][] = [
          ['cron croner rejects', () => h.client.schedule(q, 'a', { cron: 'not a cron' }, 1), /cron .* is invalid/],
          ['cron field out of range', () => h.client.schedule(q, 'a', { cron: '61 * * * *' }, 1), /cron .* is invalid/],
          ['a date, not a cron', () => h.client.schedule(q, 'a', { cron: '2030-01-01T00:00:00' }, 1), /runAt/],
          ['unknown zone', () => h.client.schedule(q, 'a', { cron: '* * * * *', tz: 'Mars/Base' }, 1), /IANA/],
          ['everyMs 0', () => h.client.schedule(q, 'a', { everyMs: 0 }, 1), /everyMs/],
          ['everyMs not whole', () => h.client.schedule(q, 'a', { everyMs: 1.5 }, 1), /everyMs/],
          ['both', () => h.client.schedule(q, 'a', { cron: '* * * * *', everyMs: 1000 } as never, 1), /exactly one/],
          ['neither', () => h.client.schedule(q, 'a', {} as never, 1), /exactly one/],
          ['tz with everyMs', () => h.client.schedule(q, 'a', { everyMs: 1000, tz: 'UTC' } as never, 1), /tz/],
          ['unknown timing key', () => h.client.schedule(q, 'a', { every: 1000 } as never, 1), /unknown option/],
          ['unknown option', () => h.client.schedule(q, 'a', { everyMs: 1000 }, 1, { delay: 5 } as never), /known/],
          ['catchUp 0', () => h.client.schedule(q, 'a', { everyMs: 1000 }, 1, { catchUp: 0 }), /catchUp/],
          ['catchUp 1001', () => h.client.schedule(q, 'a', { everyMs: 1000 }, 1, { catchUp: 1001 }), /catchUp/],
          ['priority -1', () => h.client.schedule(q, 'a', { everyMs: 1000 }, 1, { priority: -1 }), /priority/],
          ['bad group', () => h.client.schedule(q, 'a', { everyMs: 1000 }, 1, { group: 'a b' }), /group/],
          ['bad name', () => h.client.schedule(q, 'a b', { everyMs: 1000 }, 1), /schedule name/],
          ['undefined payload', () => h.client.schedule(q, 'a', { everyMs: 1000 }, undefined), /payload/],
          ['bad unschedule name', () => h.client.unschedule(q, ''), /schedule name/],
        ];
        for (const [what, call, message] of bad) {
          await assert.rejects(call, (error: unknown) => {
            assert.ok(error instanceof TypeError, `${what}: a TypeError, got ${String(error)}`);
            assert.match(error.message, message, what);
            return true;
          });
        }
        // The body is kept where a payload is: a payload that fits a message may not fit with its schedule's
        // options and bytes as base64.
        const limit = storeOf(h.client).capabilities.maxPayloadBytes;
        const big = new Uint8Array(Math.ceil(limit * 0.8));
        await assert.rejects(h.client.schedule(q, 'big', { everyMs: 1000 }, big), { name: 'PayloadTooLargeError' });
        assert.deepEqual(await h.client.schedules(q), []);
        assert.equal((await h.client.queues()).includes(q), false, 'nothing written');
      },
    );

    storeTest(fixture, 'schedule: a worker with schedules: false fires nothing', async (h) => {
      const q = h.queue('off');
      await h.client.schedule(q, 'tick', { everyMs: 1000 }, 'x');
      h.worker(q, () => undefined, { schedules: false });
      await quietPeriod(2500);
      assert.equal((await h.client.queueStatus(q)).total, 0);
      const [info] = await h.client.schedules(q);
      assert.ok(info && info.nextAt < Date.now(), 'its slot stays due until a scheduler fires it');
    });

    storeTest(
      fixture,
      "schedule: a client's workers of one queue share one scheduler, stopped with the last of them",
      async (h) => {
        const q = h.queue('shared');
        // Counts the real store's schedule reads for this queue: one loop reads once per rescan or wake.
        const store = storeOf(h.client);
        const read = store.schedules.bind(store);
        let reads = 0;
        store.schedules = (queue) => {
          if (queue === q) reads += 1;
          return read(queue);
        };
        const started = Date.now();
        const log = new JobLog();
        const workers = [1, 2, 3].map(() => h.worker(q, (job) => log.record(job)));
        await waitFor(async () => (await h.client.queueStatus(q)).consumers.length === 3, { what: 'three workers' });
        await waitFor(() => reads > 0, { what: 'the first read of the schedules' });
        await quietPeriod(300);
        // Three loops would read three times at once, and three times per rescan after.
        const rescans = Math.floor((Date.now() - started) / RESCAN_MS);
        assert.ok(reads <= 2 + rescans, `${reads} reads in ${rescans} rescans: one loop, not three`);

        const [first, second, last] = workers;
        assert.ok(first && second && last);
        await Promise.all([first.stop(), second.stop()]);
        await h.client.schedule(q, 'tick', { everyMs: 1000 }, 'x');
        await log.count(1, { timeoutMs: 10_000 });

        await last.stop();
        await h.client.unschedule(q, 'tick');
        const afterStop = reads;
        // A schedule change wakes a running loop at once; with none left, nothing reads.
        await h.client.schedule(q, 'tock', { everyMs: HOUR }, 'y');
        await quietPeriod(300);
        assert.equal(reads, afterStop, 'no scheduler runs once the last worker stopped');
      },
    );
  });
}
