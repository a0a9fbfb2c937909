/** runAt: a message held until an absolute time; promote ends the wait early. */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { storeTest } from '../support/harness.js';
import { JobLog, stateOf } from '../support/jobs.js';
import { assertNothingWritten, assertOptionsRefused } from '../support/refused-options.js';
import { quietPeriod } from '../support/wait.js';
import type { StoreFixture } from '../support/fixture.js';

const LONG_MS = 60_000;
// Clocks read in different places (client, store server) on one machine: a small margin, not a speed bound.
const CLOCK_SLACK_MS = 50;

export function runAt(fixture: StoreFixture): void {
  void describe('runAt', () => {
    storeTest(fixture, 'a message with runAt waits until then; promote runs it at once', async (h) => {
      const q = h.queue('run-at');
      const at = Date.now() + LONG_MS;
      await h.client.enqueue(q, 'later', { id: 'later', runAt: at });
      await h.client.enqueue(q, 'date', { id: 'date', runAt: new Date(at) });
      const status = await h.client.status(q, 'later');
      assert.equal(status?.state, 'queued-with-backoff');
      assert.ok(status.until !== null && Math.abs(status.until - at) < 1000, `until ${status.until} vs ${at}`);
      assert.equal(await stateOf(h.client, q, 'date'), 'queued-with-backoff');

      const log = new JobLog();
      h.worker(q, (job) => log.record(job));
      await quietPeriod();
      assert.deepEqual(log.ids(), []);
      assert.deepEqual(await h.client.promote(q, 'later'), { ok: true, id: 'later', state: 'queued' });
      await log.handled('later');
      assert.deepEqual(log.ids(), ['later']);
      assert.equal(await stateOf(h.client, q, 'date'), 'queued-with-backoff');
    });

    storeTest(fixture, 'a message runs no earlier than its runAt', async (h) => {
      const q = h.queue('run-at-soon');
      const at = Date.now() + 400;
      await h.client.enqueue(q, 'soon', { id: 'soon', runAt: at });
      const log = new JobLog();
      h.worker(q, (job) => log.record(job));
      const seen = await log.handled('soon');
      assert.ok(seen.at >= at - CLOCK_SLACK_MS, `handled ${at - seen.at} ms before runAt`);
    });

    storeTest(fixture, 'a runAt in the past is ready at once', async (h) => {
      const q = h.queue('run-at-past');
      await h.client.enqueue(q, 'past', { id: 'past', runAt: Date.now() - LONG_MS });
      assert.equal(await stateOf(h.client, q, 'past'), 'queued');
      const log = new JobLog();
      h.worker(q, (job) => log.record(job));
      await log.handled('past');
    });

    storeTest(
      fixture,
      'runAt with initialBackoffMs or debounce, or a bad runAt, is a TypeError; nothing written',
      async (h) => {
        const q = h.queue('run-at-bad');
        const at = Date.now() + LONG_MS;
        const cases: [object, RegExp][] = [
          [{ runAt: at, initialBackoffMs: 10 }, /initialBackoffMs and runAt/],
          [{ runAt: at, debounce: { id: 'd', ms: 10 } }, /runAt and debounce/],
          [{ runAt: -1 }, /runAt/],
          [{ runAt: 1.5 }, /runAt/],
          [{ runAt: 'tomorrow' }, /runAt/],
          [{ runAt: new Date(Number.NaN) }, /runAt/],
        ];
        for (const [options, message] of cases) {
          await assertOptionsRefused(h, q, options, (error) => message.test(error.message));
        }
        await assertNothingWritten(h, q);
      },
    );
  });
}
