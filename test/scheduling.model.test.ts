/**
 * The store-independent half of issue 13: checks of priorities, groups, debounce,
 * run-at and limits (src/model/scheduling.ts), and the GCRA arithmetic every store
 * runs in its claim (src/model/rate-limit.ts), simulated over long runs.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { applyConfigPatch, checkConfigPatch, DEFAULT_QUEUE_CONFIG } from '../src/model/config.js';
import { rateCharge, rateGrant } from '../src/model/rate-limit.js';
import {
  checkDebounce,
  checkGroup,
  checkGroupConcurrency,
  checkPriority,
  checkRateLimit,
  checkRunAt,
  checkScheduleName,
  DEFAULT_PRIORITY,
  PRIORITY_MAX,
  priorityKey,
} from '../src/model/scheduling.js';
import type { RateLimit } from '../src/model/types.js';

describe('scheduling checks', () => {
  it('takes priorities 0 (the default, first) to 1000 (last) and nothing else', () => {
    assert.equal(DEFAULT_PRIORITY, 0);
    for (const p of [0, 1, 500, PRIORITY_MAX]) assert.equal(checkPriority(p), p);
    for (const bad of [-1, 1001, 1.5, NaN, Infinity, '3', null, undefined]) {
      assert.throws(() => checkPriority(bad), {
        name: 'TypeError',
        message: /priority must be a whole number from 0 /,
      });
    }
  });

  it('writes priorities as 4 zero-padded digits that sort as numbers', () => {
    assert.equal(priorityKey(0), '0000');
    assert.equal(priorityKey(7), '0007');
    assert.equal(priorityKey(1000), '1000');
    const priorities = [1000, 9, 10, 0, 100, 99];
    const byKey = priorities.map(priorityKey).sort();
    assert.deepEqual(byKey, [...priorities].sort((a, b) => a - b).map(priorityKey));
  });

  it('takes group names of 1-64 letters, digits, _ . -', () => {
    for (const g of ['a', 'tenant-7', 'A.b_c', 'x'.repeat(64)]) assert.equal(checkGroup(g), g);
    for (const bad of ['', 'a b', 'a/b', 'x'.repeat(65), 'ä']) {
      assert.throws(() => checkGroup(bad), { name: 'TypeError', message: /is invalid: use 1-64 letters/ });
    }
    for (const bad of [7, null, undefined, {}]) {
      assert.throws(() => checkGroup(bad), { name: 'TypeError', message: /group must be a string/ });
    }
  });

  it('takes a debounce with exactly an id and ms', () => {
    assert.deepEqual(checkDebounce({ id: 'user:7@x', ms: 0 }), { id: 'user:7@x', ms: 0 });
    assert.deepEqual(checkDebounce({ id: 'd', ms: 5000 }), { id: 'd', ms: 5000 });
    assert.throws(() => checkDebounce({ id: 'd' }), /needs both an id .* and ms/);
    assert.throws(() => checkDebounce({ ms: 10 }), /needs both an id .* and ms/);
    assert.throws(() => checkDebounce({ id: 'd', ms: 10, key: 'x' }), /unknown option 'key'/);
    assert.throws(() => checkDebounce({ id: 'a b', ms: 10 }), /debounce id "a b" is invalid/);
    assert.throws(() => checkDebounce({ id: 'd', ms: -1 }), /debounce\.ms must be a whole number/);
    assert.throws(() => checkDebounce({ id: 'd', ms: 1.5 }), /debounce\.ms must be a whole number/);
    assert.throws(() => checkDebounce('d'), /debounce must be a plain object/);
  });

  it('takes runAt as a Date or whole ms since the epoch', () => {
    assert.equal(checkRunAt(0), 0);
    assert.equal(checkRunAt(1_900_000_000_000), 1_900_000_000_000);
    assert.equal(checkRunAt(new Date('2030-01-02T03:04:05Z')), Date.UTC(2030, 0, 2, 3, 4, 5));
    for (const bad of [-1, 1.5, new Date('nonsense'), '2030-01-01', null]) {
      assert.throws(() => checkRunAt(bad), { name: 'TypeError', message: /runAt must be a Date or a whole number/ });
    }
  });

  it('takes a rate limit of 1-1000000 per at least 1 ms, or null', () => {
    assert.equal(checkRateLimit(null), null);
    assert.deepEqual(checkRateLimit({ max: 100, perMs: 1000 }), { max: 100, perMs: 1000 });
    assert.deepEqual(checkRateLimit({ max: 1_000_000, perMs: 1 }), { max: 1_000_000, perMs: 1 });
    assert.throws(() => checkRateLimit({ max: 0, perMs: 1000 }), /rateLimit\.max must be a whole number from 1/);
    assert.throws(() => checkRateLimit({ max: 1_000_001, perMs: 1000 }), /rateLimit\.max/);
    assert.throws(() => checkRateLimit({ max: 1, perMs: 0 }), /rateLimit\.perMs must be a whole number/);
    assert.throws(() => checkRateLimit({ max: 1.5, perMs: 10 }), /rateLimit\.max/);
    assert.throws(() => checkRateLimit({ max: 1 }), /rateLimit needs max .* and perMs/);
    assert.throws(() => checkRateLimit({ max: 1, perMs: 1, burst: 2 }), /unknown option 'burst'/);
    assert.throws(() => checkRateLimit(100), /rateLimit must be a plain object/);
  });

  it('takes a group concurrency of 1-100000, or null', () => {
    assert.equal(checkGroupConcurrency(null), null);
    assert.equal(checkGroupConcurrency(1), 1);
    assert.equal(checkGroupConcurrency(100_000), 100_000);
    for (const bad of [0, -1, 100_001, 2.5, '3', undefined]) {
      assert.throws(() => checkGroupConcurrency(bad), /groupConcurrency must be a whole number from 1 to 100000/);
    }
  });

  it('takes schedule names of 1-64 letters, digits, _ . -', () => {
    assert.equal(checkScheduleName('nightly.report-1'), 'nightly.report-1');
    for (const bad of ['', 'a b', 'x'.repeat(65), 3]) assert.throws(() => checkScheduleName(bad), /is invalid/);
  });

  it('configures, keeps and removes rateLimit and groupConcurrency', () => {
    assert.equal(DEFAULT_QUEUE_CONFIG.rateLimit, null);
    assert.equal(DEFAULT_QUEUE_CONFIG.groupConcurrency, null);
    const patch = checkConfigPatch({ rateLimit: { max: 5, perMs: 100 }, groupConcurrency: 2 }, 'q');
    const limited = applyConfigPatch(DEFAULT_QUEUE_CONFIG, patch);
    assert.deepEqual(limited.rateLimit, { max: 5, perMs: 100 });
    assert.equal(limited.groupConcurrency, 2);
    // A patch that does not name them keeps them; null removes them.
    const paused = applyConfigPatch(limited, checkConfigPatch({ paused: true }, 'q'));
    assert.deepEqual(paused.rateLimit, { max: 5, perMs: 100 });
    assert.equal(paused.groupConcurrency, 2);
    const removed = applyConfigPatch(paused, checkConfigPatch({ rateLimit: null, groupConcurrency: null }, 'q'));
    assert.equal(removed.rateLimit, null);
    assert.equal(removed.groupConcurrency, null);
    assert.throws(() => checkConfigPatch({ rateLimit: { max: 0, perMs: 1 } }, 'q'), TypeError);
    assert.throws(() => checkConfigPatch({ groupConcurrency: 0 }, 'q'), TypeError);
  });

  it('keeps, changes and removes keepDone and keepFailed; a bad count is a TypeError naming the field', () => {
    assert.equal(DEFAULT_QUEUE_CONFIG.keepDone, null);
    const kept = applyConfigPatch(DEFAULT_QUEUE_CONFIG, checkConfigPatch({ keepDone: 100, keepFailed: 0 }, 'q'));
    assert.deepEqual([kept.keepDone, kept.keepFailed], [100, 0]);
    const other = applyConfigPatch(kept, checkConfigPatch({ paused: true }, 'q'));
    assert.deepEqual([other.keepDone, other.keepFailed], [100, 0]);
    const removed = applyConfigPatch(other, checkConfigPatch({ keepDone: null }, 'q'));
    assert.deepEqual([removed.keepDone, removed.keepFailed], [null, 0]);
    for (const bad of [-1, 1.5, '10', Number.NaN, 2_000_000_000]) {
      assert.throws(
        () => checkConfigPatch({ keepDone: bad }, 'q'),
        (error: unknown) => {
          assert.ok(error instanceof TypeError);
          assert.match(error.message, /keepDone/);
          return true;
        },
      );
    }
    assert.throws(() => checkConfigPatch({ keepFailed: -3 }, 'q'), /keepFailed/);
  });
});

/** One claim under the limit: what it was granted, and the tat it leaves (every grant is claimed). */
function claim(
  limit: RateLimit,
  tat: number,
  now: number,
  want: number,
): { granted: number; tat: number; wakeAt: number | null } {
  const grant = rateGrant(limit, tat, now, want);
  return { granted: grant.granted, tat: rateCharge(limit, grant, grant.granted), wakeAt: grant.wakeAt };
}

/** A small deterministic generator, so a failing run can be replayed. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0;
    return state / 2 ** 32;
  };
}

/** Grants at each time, checked against the limit's promise: at most max + rate × t in any span of t ms. */
function assertWithinLimit(limit: RateLimit, grants: readonly { at: number; granted: number }[]): void {
  const rate = limit.max / limit.perMs;
  for (let i = 0; i < grants.length; i += 1) {
    let sum = 0;
    const from = grants[i]?.at ?? 0;
    for (let j = i; j < grants.length; j += 1) {
      const g = grants[j];
      if (g === undefined) break;
      sum += g.granted;
      const allowed = limit.max + rate * (g.at - from);
      if (sum > allowed + 1e-6) {
        assert.fail(`${sum} granted in [${from}, ${g.at}] ms; at most ${allowed} allowed by ${JSON.stringify(limit)}`);
      }
      // Past max + a few intervals of span, later grants cannot break the bound for this start.
      if (g.at - from > 4 * limit.perMs) break;
    }
  }
}

describe('rate limit (GCRA)', () => {
  it('grants a fresh queue max at once, then nothing until the next interval', () => {
    const limit = { max: 100, perMs: 1000 };
    const now = 1_700_000_000_000;
    const first = claim(limit, 0, now, 1000);
    assert.equal(first.granted, 100);
    assert.equal(first.wakeAt, null);
    assert.equal(first.tat, now + 1000);
    const empty = claim(limit, first.tat, now, 5);
    assert.equal(empty.granted, 0);
    assert.equal(empty.tat, first.tat, 'nothing claimed, nothing charged');
    assert.equal(empty.wakeAt, now + 10, 'one message per perMs / max');
    assert.equal(claim(limit, first.tat, now + 9, 5).granted, 0);
    assert.equal(claim(limit, first.tat, now + 10, 5).granted, 1);
    assert.equal(claim(limit, first.tat, now + 55, 5).granted, 5);
    assert.equal(claim(limit, first.tat, now + 55, 10).granted, 5);
  });

  it('never grants more than wanted, and charges only what was claimed', () => {
    const limit = { max: 10, perMs: 1000 };
    const grant = rateGrant(limit, 0, 5000, 3);
    assert.equal(grant.granted, 3);
    assert.equal(rateCharge(limit, grant, 3), 5000 + 300);
    // A claim that found fewer messages than granted pays for those only.
    assert.equal(rateCharge(limit, grant, 1), 5000 + 100);
    assert.equal(rateCharge(limit, grant, 0), 5000);
  });

  it('refills to max, not beyond, after a quiet spell', () => {
    const limit = { max: 20, perMs: 1000 };
    let tat = claim(limit, 0, 0, 20).tat;
    assert.equal(claim(limit, tat, 0, 1).granted, 0);
    tat = claim(limit, tat, 60_000, 1000).tat;
    assert.equal(claim(limit, 0, 60_000, 1000).granted, 20);
    assert.equal(tat, 61_000);
  });

  // wakeAt rounds up to a whole ms; where float error puts the slot a hair past a whole ms, the grant's
  // epsilon already gives it at that ms, so wakeAt may be one ms late, never early.
  it('wakeAt is when a claim gets a message: never early, at most 1 ms late', () => {
    for (const limit of [
      { max: 3, perMs: 1000 },
      { max: 7, perMs: 100 },
      { max: 1, perMs: 1 },
      { max: 1000, perMs: 1 },
      { max: 100, perMs: 1000 },
    ]) {
      let tat = 0;
      let now = 1000;
      for (let i = 0; i < 200; i += 1) {
        const c = claim(limit, tat, now, limit.max);
        tat = c.tat;
        if (c.granted > 0) continue;
        assert.ok(c.wakeAt !== null && c.wakeAt > now, `${JSON.stringify(limit)} at ${now}`);
        assert.equal(claim(limit, tat, c.wakeAt - 2, 1).granted, 0, `${JSON.stringify(limit)}: nothing before wakeAt`);
        assert.ok(claim(limit, tat, c.wakeAt, 1).granted >= 1, `${JSON.stringify(limit)}: one at wakeAt`);
        now = c.wakeAt;
      }
    }
  });

  it('fractional intervals (1000/3, 1000/7) never over-grant over a long run', () => {
    for (const limit of [
      { max: 3, perMs: 1000 },
      { max: 7, perMs: 1000 },
      { max: 100, perMs: 1000 },
      { max: 6, perMs: 1 },
    ]) {
      const next = random(limit.max * 31 + limit.perMs);
      const grants: { at: number; granted: number }[] = [];
      let tat = 0;
      let now = 0;
      const end = 200 * limit.perMs;
      while (now < end) {
        const c = claim(limit, tat, now, 1 + Math.floor(next() * limit.max * 2));
        tat = c.tat;
        if (c.granted > 0) grants.push({ at: now, granted: c.granted });
        // Sometimes the worker sleeps until wakeAt, sometimes it comes back at a random time.
        now = c.wakeAt !== null && next() < 0.5 ? c.wakeAt : now + Math.floor(next() * (limit.perMs / limit.max) * 3);
      }
      assertWithinLimit(limit, grants);
      const total = grants.reduce((sum, g) => sum + g.granted, 0);
      assert.ok(total <= limit.max + (end * limit.max) / limit.perMs, `${JSON.stringify(limit)}: ${total} in all`);
    }
  });

  it('workers that sleep until wakeAt get max + rate × t: 100/s for 60 s hands out 6100', () => {
    const limit = { max: 100, perMs: 1000 };
    let tat = 0;
    let now = 0;
    let total = 0;
    let claims = 0;
    while (now <= 60_000) {
      const c = claim(limit, tat, now, 8);
      tat = c.tat;
      total += c.granted;
      claims += 1;
      now = c.wakeAt ?? now;
    }
    // 100 at once, then one per 10 ms up to and including t = 60 s: no slot is lost to rounding.
    assert.equal(total, 100 + 6000);
    assert.ok(claims < 2 * total, 'no busy loop: each empty claim sleeps to a slot');
  });

  it('one slot per 333.33 ms for 1000/3 across a long run: none lost, none extra', () => {
    const limit = { max: 3, perMs: 1000 };
    let tat = 0;
    let now = 0;
    let total = 0;
    const end = 3_600_000;
    while (now <= end) {
      const c = claim(limit, tat, now, 1);
      tat = c.tat;
      total += c.granted;
      now = c.wakeAt ?? now;
    }
    // 3 at once, then 3 per second for an hour.
    assert.ok(total <= 3 + (3 * end) / 1000, String(total));
    assert.ok(total >= (3 * end) / 1000, String(total));
  });
});
