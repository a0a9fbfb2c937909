/**
 * The compact text of SQLite's queue events (src/stores/sqlite/event-text.ts): every id and error reads back as
 * written, whatever its characters, and kvmq's own ids take the short form.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import { decodeEvents, eventRecord, timeRecord } from '../src/stores/sqlite/event-text.js';
import { newMessageId } from '../src/model/ids.js';

describe('sqlite event text', () => {
  test('events of any id and error read back in order, each with the time recorded before it', () => {
    const ids = [
      newMessageId(),
      randomUUID(),
      randomUUID().toUpperCase(), // not the short form: it would read back in lower case
      '0193b7e5-7a4c-7123-8abc-0123456789aG',
      '0193b7e5-7a4c-7123-8abc-0123456789aé', // 36 characters, one outside ASCII
      '00000000-0000-0000-0000-000000000000',
      'ffffffff-ffff-ffff-ffff-ffffffffffff',
      'x'.repeat(36),
      '',
      "a:b~c'd@e;f",
      'ÄÖ😀',
      '12',
    ];
    const errors = [null, '', 'boom', "x:1;@~'\n…", 'é'.repeat(500)];
    const expected: [number, string, number, string | null, number][] = [];
    let text = '';
    ids.forEach((id, k) => {
      // Three events to each time record: each reads the one before it.
      const at = 1_764_107_000_000 + Math.floor(k / 3);
      if (k % 3 === 0) text += timeRecord(at);
      const error = errors[k % errors.length] ?? null;
      text += eventRecord(k % 6, id, k * 37, error);
      expected.push([k % 6, id, k * 37, error, at]);
    });
    assert.deepEqual(decodeEvents(text), expected);
  });

  test("kvmq's ids take 25 characters per event, other ids their own length and a prefix", () => {
    assert.equal(eventRecord(1, newMessageId(), 1, null).length, 25);
    assert.equal(eventRecord(0, 'order-17', 0, null), "a0'8:order-17");
    assert.equal(eventRecord(3, 'm', 2, 'no'), "D2'1:m2:no");
    assert.throws(() => decodeEvents("a0'9:order-17"), /ends inside an event/);
  });
});
