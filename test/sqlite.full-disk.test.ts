/**
 * SQLite on a disk that fills up (a small tmpfs filled for real, ENOSPC): a worker started while the disk is full
 * keeps trying and reports each failure, and handles every waiting message once there is room again; a worker
 * running when the disk fills returns from stop() within stopGraceMs, leaving what it could not store to the locks.
 */
import assert from 'node:assert/strict';
import { FilterError, StoreUnavailableError, type Client } from '../src/index.js';
import { smallDisks, smallDiskSkipReason, type SmallDisk } from './fixtures/small-disk.js';
import { gatedHandlers, timedStop } from './support/gate.js';
import { storeTest, type Harness } from './support/harness.js';
import { waitFor } from './support/wait.js';

const disks = smallDisks();
// A stop's handlers return at once here: it waits this long for the full disk, then gives up.
const STOP_GRACE_MS = 1000;

function fullDiskTest(name: string, fn: (h: Harness) => Promise<void>): void {
  if (smallDiskSkipReason !== false) {
    storeTest(disks, name, (_h, t) => t.skip(smallDiskSkipReason as string));
    return;
  }
  storeTest(disks, name, fn, { timeoutMs: 60_000 });
}

async function enqueueNumbered(client: Client, queue: string, count: number): Promise<string[]> {
  const results = await client.enqueueBatch(
    queue,
    Array.from({ length: count }, (_, i) => ({ payload: i, id: `m${i}` })),
  );
  return results.map((result) => result.id);
}

/** Empties the harness's error list, checking each one is the store refusing a write for want of room. */
function takeDiskFullErrors(h: Harness): unknown[] {
  const errors = h.errors.splice(0);
  for (const error of errors) {
    assert.ok(error instanceof StoreUnavailableError, `not a StoreUnavailableError: ${String(error)}`);
    assert.equal(error.transient, true);
  }
  return errors;
}

async function waitUntilAllDone(h: Harness, queue: string, handled: Set<string>, ids: string[]): Promise<void> {
  await waitFor(() => ids.every((id) => handled.has(id)), {
    timeoutMs: 30_000,
    what: () => `every message handled (${handled.size} of ${ids.length})`,
  });
  await waitFor(
    async () => {
      const { counts } = await h.client.queueStatus(queue);
      return counts.queued === 0 && counts.locked === 0;
    },
    { what: 'every outcome stored' },
  );
}

/** Frees the disk, then a fresh worker takes every message to done, none lost; the errors so far are read. */
async function drainWithRoom(h: Harness, disk: SmallDisk, queue: string, ids: string[]): Promise<void> {
  disk.free();
  const handled = new Set<string>();
  h.worker(queue, (job) => void handled.add(job.id), { concurrency: 4 });
  await waitUntilAllDone(h, queue, handled, ids);
  h.errors.length = 0;
}

fullDiskTest('a worker started on a full disk keeps trying, then handles every waiting message', async (h) => {
  const q = h.queue('full-start');
  const disk = disks.disk(h.url);
  const ids = await enqueueNumbered(h.client, q, 209);
  disk.fill();
  await assert.rejects(h.client.enqueue(q, 'one more'), /disk is full/);
  h.errors.length = 0;

  const handled = new Set<string>();
  // autoStart, as client.worker() starts it by default: its failures go to the worker's onError.
  h.worker(q, (job) => void handled.add(job.id));
  await waitFor(() => h.errors.length >= 3, { timeoutMs: 15_000, what: 'three failures reported' });
  assert.equal(handled.size, 0);

  disk.free();
  await waitUntilAllDone(h, q, handled, ids);
  const failures = takeDiskFullErrors(h);
  assert.ok(
    failures.every((error) => /disk is full/.test(String(error))),
    failures.map(String).join('\n'),
  );
});

fullDiskTest('start() resolves on a full disk, and still rejects at once for filters the queue lacks', async (h) => {
  const q = h.queue('full-start-filters');
  await h.client.configure(q, { filterEnums: { region: ['eu', 'us'] } });
  const disk = disks.disk(h.url);
  disk.fill();
  const bad = h.worker(q, () => undefined, { filters: { region: 'mars' }, autoStart: false });
  await assert.rejects(bad.start(), FilterError);
  assert.equal(bad.running, false);

  const good = h.worker(q, () => undefined, { filters: { region: 'eu' }, autoStart: false });
  await good.start();
  assert.equal(good.running, true);
  await waitFor(() => h.errors.length >= 1, { what: 'the failed registration reported' });
  await good.stop();
  assert.equal(good.running, false);
  disk.free();
  takeDiskFullErrors(h);
});

fullDiskTest('a worker running when the disk fills returns from stop() and leaves the rest to the locks', async (h) => {
  const q = h.queue('full-stop');
  const disk = disks.disk(h.url);
  const ids = await enqueueNumbered(h.client, q, 30);
  const gated = gatedHandlers();
  const first = h.worker(q, gated.handler, { concurrency: 4, prefetch: 2, lockMs: 1500, stopGraceMs: STOP_GRACE_MS });
  await waitFor(() => gated.started() === 4, { what: 'four handlers running' });
  disk.fill();
  gated.release();
  const stopMs = await timedStop(first, 1);
  // Generous: what matters is that it returns at all (it waited forever before).
  assert.ok(stopMs < STOP_GRACE_MS + 10_000, `stop() took ${Math.round(stopMs)} ms`);
  const said = h.errors.map(String);
  // The four results and the two prefetched messages it could not give back.
  assert.ok(
    said.some((text) => /stopped without storing the outcome of 6 message\(s\)/.test(text)),
    said.join('\n'),
  );
  takeDiskFullErrors(h);

  await drainWithRoom(h, disk, q, ids);
});

fullDiskTest('a forced stop on a full disk returns too, its releases left to the locks', async (h) => {
  const q = h.queue('full-force');
  const disk = disks.disk(h.url);
  const ids = await enqueueNumbered(h.client, q, 10);
  // Handlers that ignore their signal: only a forced stop ends the wait for them.
  const gated = gatedHandlers();
  const first = h.worker(q, gated.handler, { concurrency: 3, lockMs: 1500, stopGraceMs: STOP_GRACE_MS });
  await waitFor(() => gated.started() === 3, { what: 'three handlers running' });
  disk.fill();
  const stopMs = await timedStop(first, 2);
  assert.ok(stopMs < STOP_GRACE_MS + 10_000, `stop() took ${Math.round(stopMs)} ms`);
  assert.ok(
    h.errors.some((error) => /stopped without storing the outcome of 3 message\(s\)/.test(String(error))),
    h.errors.map(String).join('\n'),
  );
  takeDiskFullErrors(h);
  gated.release();

  await drainWithRoom(h, disk, q, ids);
});

fullDiskTest('a worker resumes within seconds once there is room again after a long spell of failures', async (h) => {
  const q = h.queue('full-long');
  const disk = disks.disk(h.url);
  const ids = await enqueueNumbered(h.client, q, 20);
  const gated = gatedHandlers();
  h.worker(q, gated.handler, { concurrency: 2 });
  await waitFor(() => gated.started() === 2, { what: 'two handlers running' });
  disk.fill();
  // Their finishes, the claims after them and the renewals all fail, each lengthening the backoff.
  gated.release();
  await new Promise((resolve) => setTimeout(resolve, 16_000));
  takeDiskFullErrors(h);
  disk.free();
  const room = performance.now();
  await waitFor(() => gated.started() === ids.length, { timeoutMs: 30_000, what: 'every message started' });
  const resumedMs = performance.now() - room;
  // Tries are at most 5 s apart; generous for a loaded machine, yet short of the 10-30 s an uncapped backoff took.
  assert.ok(resumedMs < 9000, `the worker resumed ${Math.round(resumedMs)} ms after there was room again`);
  await waitUntilAllDone(h, q, new Set(ids), ids);
});
