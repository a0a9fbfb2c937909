/** Slot math of schedules, without a store: cron in time zones and across DST, everyMs, catch-up, the body. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decodeBody, encodeBody, type ScheduleBody } from '../src/schedule/body.js';
import { slotMessageId, slotMessages } from '../src/schedule/messages.js';
import { checkTiming, dueSlots, NEVER, slotClock, type ScheduleTiming } from '../src/schedule/timing.js';
import { checkMessageId } from '../src/model/validate.js';

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const at = (iso: string): number => Date.parse(iso);
const iso = (slots: readonly number[]): string[] => slots.map((slot) => new Date(slot).toISOString());

async function clock(timing: ScheduleTiming) {
  return slotClock(await checkTiming(timing));
}

void describe('everyMs slots', () => {
  void test('slots are multiples of everyMs since the epoch, the next strictly after', async () => {
    const c = await clock({ everyMs: 15 * MINUTE });
    assert.equal(c.after(at('2026-01-01T10:07:00Z')), at('2026-01-01T10:15:00Z'));
    assert.equal(c.after(at('2026-01-01T10:15:00Z')), at('2026-01-01T10:30:00Z'), 'a slot at t is not after t');
    const odd = await clock({ everyMs: 7 });
    assert.equal(odd.after(20), 21);
  });

  void test('latest: the slots in [from, upTo], only the latest max, oldest first', async () => {
    const c = await clock({ everyMs: SECOND });
    assert.deepEqual(c.latest(1000, 5500, 10), [1000, 2000, 3000, 4000, 5000]);
    assert.deepEqual(c.latest(1000, 5500, 2), [4000, 5000]);
    assert.deepEqual(c.latest(1001, 1999, 5), []);
  });
});

void describe('cron slots', () => {
  void test('UTC unless a zone is given; a zone moves the slot with its offset', async () => {
    const utc = await clock({ cron: '0 9 * * *' });
    assert.equal(utc.after(at('2026-01-15T12:00:00Z')), at('2026-01-16T09:00:00Z'));
    const berlin = await clock({ cron: '0 9 * * *', tz: 'Europe/Berlin' });
    assert.equal(berlin.after(at('2026-01-15T12:00:00Z')), at('2026-01-16T08:00:00Z'), 'CET is UTC+1');
    assert.equal(berlin.after(at('2026-07-15T12:00:00Z')), at('2026-07-16T07:00:00Z'), 'CEST is UTC+2');
    const ny = await clock({ cron: '0 9 * * *', tz: 'America/New_York' });
    assert.equal(ny.after(at('2026-01-15T15:00:00Z')), at('2026-01-16T14:00:00Z'));
  });

  void test('six fields: seconds first', async () => {
    const c = await clock({ cron: '*/10 * * * * *' });
    assert.equal(c.after(at('2026-01-01T00:00:10Z')), at('2026-01-01T00:00:20Z'));
  });

  void test('Europe/Berlin springs forward: a time in the gap runs once, at the end of the gap', async () => {
    // 2026-03-29: 02:00 CET becomes 03:00 CEST (01:00 UTC); 02:30 does not exist that day.
    const daily = await clock({ cron: '30 2 * * *', tz: 'Europe/Berlin' });
    const slots: number[] = [];
    for (let t = at('2026-03-27T12:00:00Z'); slots.length < 4; t = slots.at(-1) ?? t) slots.push(daily.after(t));
    assert.deepEqual(iso(slots), [
      '2026-03-28T01:30:00.000Z', // 02:30 CET
      '2026-03-29T01:00:00.000Z', // the gap: 03:00 CEST
      '2026-03-30T00:30:00.000Z', // 02:30 CEST
      '2026-03-31T00:30:00.000Z',
    ]);
    // An hourly job loses the hour that does not exist: slots stay an hour apart in UTC.
    const hourly = await clock({ cron: '0 * * * *', tz: 'Europe/Berlin' });
    assert.deepEqual(iso(hourly.latest(at('2026-03-28T23:00:00Z'), at('2026-03-29T02:00:00Z'), 10)), [
      '2026-03-28T23:00:00.000Z',
      '2026-03-29T00:00:00.000Z',
      '2026-03-29T01:00:00.000Z',
      '2026-03-29T02:00:00.000Z',
    ]);
  });

  void test('Europe/Berlin falls back: a fixed time runs once, an interval job on both 02:30s', async () => {
    // 2026-10-25: 03:00 CEST becomes 02:00 CET (01:00 UTC); 02:00-03:00 happens twice.
    const daily = await clock({ cron: '30 2 * * *', tz: 'Europe/Berlin' });
    assert.equal(daily.after(at('2026-10-24T12:00:00Z')), at('2026-10-25T00:30:00Z'));
    assert.equal(daily.after(at('2026-10-25T00:30:00Z')), at('2026-10-26T01:30:00Z'), 'not again at 02:30 CET');
    const half = await clock({ cron: '*/30 * * * *', tz: 'Europe/Berlin' });
    assert.deepEqual(iso(half.latest(at('2026-10-25T00:00:00Z'), at('2026-10-25T02:00:00Z'), 10)), [
      '2026-10-25T00:00:00.000Z', // 02:00 CEST
      '2026-10-25T00:30:00.000Z', // 02:30 CEST
      '2026-10-25T01:00:00.000Z', // 02:00 CET
      '2026-10-25T01:30:00.000Z', // 02:30 CET
      '2026-10-25T02:00:00.000Z',
    ]);
  });

  void test('a cron pinned to past years has no next slot', async () => {
    const c = await clock({ cron: '0 0 0 1 1 * 2099' });
    assert.equal(c.after(at('2100-01-01T00:00:00Z')), NEVER);
  });
});

void describe('catch-up', () => {
  void test('nothing is due before nextAt', async () => {
    const c = await clock({ everyMs: MINUTE });
    assert.equal(dueSlots(c, at('2026-01-01T10:01:00Z'), at('2026-01-01T10:00:59.999Z'), 1), null);
  });

  void test('on time: the slot at nextAt, then the next slot', async () => {
    const c = await clock({ cron: '* * * * *' });
    const nextAt = at('2026-01-01T10:01:00Z');
    assert.deepEqual(dueSlots(c, nextAt, nextAt + 5, 1), { slots: [nextAt], nextAt: nextAt + MINUTE });
  });

  void test('after a downtime: the latest catchUp missed slots, and on from the next future slot', async () => {
    const c = await clock({ cron: '0 * * * *', tz: 'Europe/Berlin' });
    const due = dueSlots(c, at('2026-01-01T00:00:00Z'), at('2026-01-01T10:30:00Z'), 3);
    assert.ok(due);
    assert.deepEqual(iso(due.slots), [
      '2026-01-01T08:00:00.000Z',
      '2026-01-01T09:00:00.000Z',
      '2026-01-01T10:00:00.000Z',
    ]);
    assert.equal(due.nextAt, at('2026-01-01T11:00:00Z'));
    const one = dueSlots(c, at('2026-01-01T00:00:00Z'), at('2026-01-01T10:30:00Z'), 1);
    assert.deepEqual(iso(one?.slots ?? []), ['2026-01-01T10:00:00.000Z'], 'the default catch-up is the latest slot');
    const all = dueSlots(c, at('2026-01-01T08:00:00Z'), at('2026-01-01T10:30:00Z'), 1000);
    assert.equal(all?.slots.length, 3, 'never more than were missed');
  });

  void test('a long downtime of a per-second cron costs catchUp slots, not every missed one', async () => {
    const c = await clock({ cron: '* * * * * *' });
    const now = at('2026-01-08T00:00:00.500Z');
    const due = dueSlots(c, now - 7 * 24 * HOUR, now, 1000);
    assert.ok(due);
    assert.equal(due.slots.length, 1000);
    assert.equal(due.slots.at(-1), at('2026-01-08T00:00:00Z'));
    assert.equal(due.slots[0], at('2026-01-07T23:43:21Z'));
    assert.equal(due.nextAt, at('2026-01-08T00:00:01Z'));
  });

  void test('everyMs: a long downtime costs catchUp slots too', async () => {
    const c = await clock({ everyMs: SECOND });
    const due = dueSlots(c, 0, 10 ** 12 + 300, 2);
    assert.deepEqual(due, { slots: [10 ** 12 - SECOND, 10 ** 12], nextAt: 10 ** 12 + SECOND });
  });
});

void describe('timing checks', () => {
  const bad: [string, unknown, RegExp][] = [
    ['cron croner rejects', { cron: 'every day' }, /cron "every day" is invalid .* use 5 fields/],
    ['a date', { cron: '2030-01-01T00:00:00' }, /a date, not a cron expression/],
    ['unknown zone', { cron: '* * * * *', tz: 'Mars/Base' }, /IANA time zone/],
    ['an offset is not a zone', { cron: '* * * * *', tz: '+01:00' }, /IANA time zone/],
    ['both', { cron: '* * * * *', everyMs: 5 }, /exactly one/],
    ['neither', {}, /exactly one/],
    ['everyMs below 1', { everyMs: 0 }, /everyMs must be a whole number of milliseconds from 1/],
    ['tz with everyMs', { everyMs: 5, tz: 'UTC' }, /tz goes with cron/],
    ['unknown key', { cron: '* * * * *', timezone: 'UTC' }, /unknown option 'timezone'/],
    ['not an object', '* * * * *', /plain object/],
  ];
  for (const [what, timing, message] of bad) {
    void test(`refused: ${what}`, async () => {
      await assert.rejects(
        checkTiming(timing),
        (error: unknown) => error instanceof TypeError && message.test(error.message),
      );
    });
  }

  void test('accepted timings come back without extra keys', async () => {
    assert.deepEqual(await checkTiming({ cron: '@daily', tz: 'Europe/Berlin' }), {
      cron: '@daily',
      tz: 'Europe/Berlin',
    });
    assert.deepEqual(await checkTiming({ everyMs: 1000, tz: undefined }), { everyMs: 1000 });
  });
});

void describe('body and messages', () => {
  const body: ScheduleBody = {
    timing: { cron: '0 3 * * *', tz: 'Europe/Berlin' },
    catchUp: 4,
    payload: new Uint8Array([0, 255, 10]),
    encoding: 'bytes',
    metadata: { by: 'nightly' },
    filters: { size: 'm' },
    priority: 7,
    group: 'tenant-1',
    policy: '{"attempts":3}',
  };

  void test('a body reads back as written, bytes included', () => {
    const decoded = decodeBody('n', encodeBody(body));
    assert.deepEqual({ ...decoded, payload: [...decoded.payload] }, { ...body, payload: [0, 255, 10] });
  });

  void test('a JSON payload is kept as the value, not as escaped text, and reads back byte for byte', () => {
    const value = { text: 'a "quoted" \u00e9 \ud83d\ude00', list: [1, 2.5, null] };
    const payload = Buffer.from(JSON.stringify(value), 'utf8');
    const text = encodeBody({ ...body, payload, encoding: 'json' });
    assert.deepEqual((JSON.parse(text) as { payload: unknown }).payload, value);
    assert.ok(text.length < payload.length + 400, 'the body is the payload plus a little');
    assert.deepEqual(Buffer.from(decodeBody('n', text).payload), payload);
  });

  void test('a body of another layout version is refused, not guessed at', () => {
    const newer = JSON.stringify({ ...JSON.parse(encodeBody(body)), v: 2 });
    assert.throws(() => decodeBody('n', newer), /another kvmq version/);
    assert.throws(() => decodeBody('n', 'nope'), /not JSON/);
  });

  void test('a slot message has the id <name>@<ISO slot>, valid as a message id, and the options', () => {
    const slot = at('2026-01-01T02:00:00Z');
    assert.equal(slotMessageId('nightly', slot), 'nightly@2026-01-01T02:00:00.000Z');
    assert.equal(checkMessageId(slotMessageId('a'.repeat(64), slot)), `${'a'.repeat(64)}@2026-01-01T02:00:00.000Z`);
    const [message] = slotMessages('nightly', body, [slot]);
    assert.ok(message);
    assert.equal(message.filterClass, 'size=m');
    assert.equal(message.priority, 7);
    assert.equal(message.group, 'tenant-1');
    assert.equal(message.policy, '{"attempts":3}');
    assert.equal(message.initialBackoffMs, 0);
    assert.equal(message.debounceId, null);
  });
});
