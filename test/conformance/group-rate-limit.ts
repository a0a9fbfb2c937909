/** A queue's groupRateLimit: at most `max` messages of one group start per `perMs`, across every worker. */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { storeTest } from '../support/harness.js';
import { JobLog } from '../support/jobs.js';
import type { StoreFixture } from '../support/fixture.js';

// Starts are read where handlers begin, each after its own delivery, which a loaded machine or a pooler's hop
// delays by up to hundreds of ms while the store spaced the claims exactly. So the bounds allow that much either
// way, well inside what a broken limit does: a burst starts within a few ms, half or twice the rate is seconds
// off over a group's starts.
const DELIVERY_JITTER_MS = 400;

/**
 * The start times of a group's messages: no `max` + 1 of them within one window of `perMs`, and from the first
 * to the last the limit's spacing (perMs / max between two starts, no burst), neither faster nor much slower.
 */
function assertWithinLimit(starts: readonly number[], max: number, perMs: number, group: string): void {
  const sorted = [...starts].sort((a, b) => a - b);
  const seen = `group ${group}: ${sorted.join(',')}`;
  for (let i = 0; i + max < sorted.length; i += 1) {
    const span = (sorted[i + max] ?? 0) - (sorted[i] ?? 0);
    assert.ok(span >= perMs - DELIVERY_JITTER_MS, `${max + 1} starts within ${span} ms (${seen})`);
  }
  const spaced = ((sorted.length - 1) * perMs) / max;
  const whole = (sorted.at(-1) ?? 0) - (sorted[0] ?? 0);
  assert.ok(whole >= spaced - DELIVERY_JITTER_MS, `faster than the limit: ${whole} ms from first to last (${seen})`);
  assert.ok(whole <= spaced + perMs, `held back past the limit: ${whole} ms from first to last (${seen})`);
}

export function groupRateLimit(fixture: StoreFixture): void {
  void describe('group rate limit', () => {
    storeTest(
      fixture,
      'two workers start at most max of a group per window, while other groups and ungrouped messages run',
      async (h) => {
        const q = h.queue('group-rate');
        const limit = { max: 2, perMs: 1000 };
        await h.client.configure(q, { groupRateLimit: limit });
        assert.deepEqual((await h.client.config(q)).groupRateLimit, limit);
        await h.client.enqueueBatch(q, [
          ...Array.from({ length: 6 }, (_, n) => ({ payload: n, id: `a-${n}`, group: 'a' })),
          ...Array.from({ length: 3 }, (_, n) => ({ payload: n, id: `b-${n}`, group: 'b' })),
          ...Array.from({ length: 4 }, (_, n) => ({ payload: n, id: `plain-${n}` })),
        ]);
        const log = new JobLog();
        h.worker(q, (job) => log.record(job), { concurrency: 4, eoqBackoffMs: 20 });
        h.worker(q, (job) => log.record(job), { concurrency: 4, eoqBackoffMs: 20 }, await h.connect());
        await log.count(13, { timeoutMs: 15_000 });
        const startsOf = (prefix: string): number[] => log.seen.filter((s) => s.id.startsWith(prefix)).map((s) => s.at);
        assertWithinLimit(startsOf('a-'), limit.max, limit.perMs, 'a');
        assertWithinLimit(startsOf('b-'), limit.max, limit.perMs, 'b');
        // Group a waiting for its slots held back neither group b nor the ungrouped messages: those started before
        // a's third, which waits a whole window after its first.
        const aThird = [...startsOf('a-')].sort((x, y) => x - y)[2] ?? 0;
        assert.ok(
          [
            ...startsOf('plain-'),
            ...startsOf('b-')
              .sort((x, y) => x - y)
              .slice(0, 2),
          ].every((at) => at < aThird),
          log.ids().join(','),
        );
      },
    );

    storeTest(fixture, 'a bad groupRateLimit is a TypeError naming it; a good one is kept', async (h) => {
      const q = h.queue('group-rate-bad');
      for (const bad of [{ max: 0, perMs: 1000 }, { max: 1, perMs: 0 }, { max: 1 }, 5]) {
        await assert.rejects(
          h.client.configure(q, { groupRateLimit: bad as never }),
          (error: unknown) => error instanceof TypeError && /groupRateLimit/.test(error.message),
          JSON.stringify(bad),
        );
      }
      await h.client.configure(q, { groupRateLimit: { max: 1, perMs: 1000 } });
      assert.deepEqual((await h.client.config(q)).groupRateLimit, { max: 1, perMs: 1000 });
    });
  });
}
