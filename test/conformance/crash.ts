/** Workers in other processes that die or stall: delivery is at least once, and late outcomes are refused. */
import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe } from 'node:test';
import { storeTest, type Harness } from '../support/harness.js';
import { JobLog, waitForStatus } from '../support/jobs.js';
import { gate, waitFor } from '../support/wait.js';
import type { Child } from '../support/child.js';
import type { StoreFixture } from '../support/fixture.js';
import { storeOf } from '../../src/client/client-store.js';

// Long enough that renewals slowed by a loaded machine land before the worker's fence (it gives up unrenewed locks).
const LOCK_MS = 1500;
// Generous: a store may free a dead consumer's claim only when its session or lease times out.
const TAKEOVER_TIMEOUT_MS = 20_000;
// The worker that takes over holds the message while the test stops the stalled process: only the stalled lock
// needs to be short, and a short one here lapsed on a slow machine before the test released the handler.
const TAKER_LOCK_MS = 10_000;

/** Starts a worker process on `q` and waits until its handler holds `m`; returns it and its worker id. */
async function childHolding(h: Harness, q: string, args: readonly string[]): Promise<{ child: Child; id: string }> {
  const child = h.spawn('worker-process.ts', [h.url, q, ...args]);
  const [, id] = await child.line(/^ready (\S+)$/);
  assert.ok(id !== undefined);
  await h.client.enqueue(q, 'x', { id: 'm' });
  await child.line(/^claimed m 1$/);
  const held = await h.client.status(q, 'm');
  assert.equal(held?.state, 'locked');
  assert.equal(held.consumer, id);
  return { child, id };
}

export function crash(fixture: StoreFixture): void {
  void describe('crash', () => {
    storeTest(
      fixture,
      'a worker process killed mid-handler loses the message; another handles it with attempt 2',
      async (h) => {
        const q = h.queue('killed');
        const { child, id } = await childHolding(h, q, ['hang', String(LOCK_MS)]);
        assert.equal((await child.kill('SIGKILL')).signal, 'SIGKILL');

        const log = new JobLog();
        h.worker(q, (job) => log.record(job), { lockMs: LOCK_MS });
        assert.equal((await log.handled('m', undefined, { timeoutMs: TAKEOVER_TIMEOUT_MS })).attempt, 2);
        const done = await waitForStatus(h.client, q, 'm', 'done-awaiting-gc');
        assert.equal(done.attempt, 2);
        assert.equal(done.outcome, 'success');
        assert.deepEqual(log.ids(), ['m']);

        // The dead consumer drops out of the registry once its registration lapses.
        await waitFor(
          async () => {
            await h.client.gc(q);
            return !(await h.client.queueStatus(q)).consumers.some((c) => c.id === id);
          },
          { what: 'the dead consumer to leave the registry', timeoutMs: TAKEOVER_TIMEOUT_MS },
        );
      },
    );

    storeTest(
      fixture,
      'a killed worker frees its message at once where the store has instantRelease, else only when its lock ends',
      async (h) => {
        const q = h.queue('release');
        const instant = storeOf(h.client).capabilities.instantRelease;
        const lockMs = instant ? 30_000 : 2_000;
        const { child } = await childHolding(h, q, ['hang', String(lockMs)]);
        await child.kill('SIGKILL');
        const killedAt = Date.now();
        // The lock's end as the store last saw it: renewals only move it later.
        const lockEnd = (await h.client.status(q, 'm'))?.until ?? 0;
        const log = new JobLog();
        h.worker(q, (job) => log.record(job), { lockMs });
        const seen = await log.handled('m', 2, { timeoutMs: instant ? lockMs / 3 : lockMs + TAKEOVER_TIMEOUT_MS });
        if (instant) {
          assert.ok(seen.at - killedAt < lockMs / 3, 'freed long before the lock would end');
        } else {
          assert.ok(lockEnd > killedAt, 'the dead worker still held its lock when it was killed');
          assert.ok(seen.at >= lockEnd, 'not handed over while the dead worker still held the lock');
        }
      },
    );

    storeTest(
      fixture,
      'a stalled worker loses its lock; its late outcome does not overwrite the new run',
      async (h) => {
        const q = h.queue('stalled');
        const resumeFile = join(tmpdir(), `kvmq-resume-${q}`);
        h.cleanup(() => rmSync(resumeFile, { force: true }));
        const { child, id } = await childHolding(h, q, ['stall', String(LOCK_MS), resumeFile]);

        const release = gate();
        const log = new JobLog();
        const worker = h.worker(
          q,
          async (job) => {
            log.record(job);
            await release.opened;
          },
          { lockMs: TAKER_LOCK_MS },
        );
        assert.equal((await log.handled('m', undefined, { timeoutMs: TAKEOVER_TIMEOUT_MS })).attempt, 2);

        // Wake the stalled process; it returns its outcome and then shuts down gracefully.
        writeFileSync(resumeFile, '');
        await child.line(/^resumed m 1$/);
        assert.deepEqual(await child.kill('SIGTERM'), { code: 0, signal: null });
        const held = await h.client.status(q, 'm');
        assert.equal(held?.state, 'locked');
        assert.equal(held.consumer, worker.id);
        assert.equal(held.attempt, 2);
        assert.notEqual(held.consumer, id);

        release.open();
        const done = await waitForStatus(h.client, q, 'm', 'done-awaiting-gc');
        assert.equal(done.outcome, 'success');
        assert.equal(done.lastError, null);
        assert.equal(done.attempt, 2);
      },
    );
  });
}
