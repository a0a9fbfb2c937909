/** A worker's claims: one at a time; where the store overlaps them, the next sent ahead while handlers are quick. */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { storeTest, type Harness } from '../support/harness.js';
import { JobLog } from '../support/jobs.js';
import { gate, quietPeriod, waitFor } from '../support/wait.js';
import { storeOf } from '../../src/client/client-store.js';
import type { ClaimRequest } from '../../src/stores/contract/contract.js';
import type { Worker } from '../../src/index.js';
import type { StoreFixture } from '../support/fixture.js';

interface ClaimWatch {
  /** Most claims of the queue in flight at once. */
  most: number;
  /** The `max` of each claim, in the order sent. */
  readonly sizes: number[];
}

/** Enqueues `n` messages m0, m1, … (payload: their index) in one batch. */
async function fill(h: Harness, queue: string, n: number): Promise<void> {
  await h.client.enqueueBatch(
    queue,
    Array.from({ length: n }, (_, i) => ({ payload: i, id: `m${i}` })),
  );
}

/** A worker stopped with a claim sent ahead: `handled` messages done, the claim's given back, none locked. */
async function assertGaveBack(h: Harness, queue: string, worker: Worker, n: number, handled: number): Promise<void> {
  assert.equal(worker.inFlight, 0);
  const counts = (await h.client.queueStatus(queue)).counts;
  assert.equal(counts.locked, 0, 'no message stays locked to the stopped worker');
  assert.equal(counts['done-awaiting-gc'], handled);
  assert.equal(counts.queued, n - handled, 'the claim sent ahead gave its messages back');
}

/**
 * Watches the real store's claims of `queue` (the worker calls the store the client holds). `hold`: the answer of
 * that claim (1 = the first) reaches the worker only once `until` resolves, as over a slow network.
 */
function watchClaims(h: Harness, queue: string, hold?: { claim: number; until: Promise<void> }): ClaimWatch {
  const store = storeOf(h.client);
  const claim = store.claim.bind(store);
  const watch: ClaimWatch = { most: 0, sizes: [] };
  let inFlight = 0;
  store.claim = async (q: string, request: ClaimRequest) => {
    if (q !== queue) return claim(q, request);
    inFlight += 1;
    watch.most = Math.max(watch.most, inFlight);
    watch.sizes.push(request.max);
    const until = hold?.claim === watch.sizes.length ? hold.until : null;
    try {
      const result = await claim(q, request);
      if (until !== null) await until;
      return result;
    } finally {
      inFlight -= 1;
    }
  };
  return watch;
}

export function claims(fixture: StoreFixture): void {
  void describe('claims', () => {
    storeTest(
      fixture,
      'a backlog: one claim at a time; handlers, prefetch and held messages stay within bounds',
      async (h) => {
        const q = h.queue('claims-backlog');
        const n = 400;
        const concurrency = 12;
        const prefetch = 4;
        const slots = concurrency + prefetch;
        await fill(h, q, n);
        const watch = watchClaims(h, q);
        const log = new JobLog();
        let active = 0;
        let mostActive = 0;
        let mostHeld = 0;
        const worker = h.worker(
          q,
          async (job) => {
            log.record(job);
            active += 1;
            mostActive = Math.max(mostActive, active);
            mostHeld = Math.max(mostHeld, worker.inFlight);
            // Some handlers return at once, some a turn later: slots free in bursts and one by one.
            if (Number(job.payload) % 3 === 0) await new Promise((resolve) => setImmediate(resolve));
            active -= 1;
          },
          { concurrency, prefetch, monitor: (info) => void (mostHeld = Math.max(mostHeld, info.inFlight)) },
        );
        await log.count(n);
        await worker.stop();
        assert.equal(new Set(log.ids()).size, n, 'each message handled once');
        assert.equal(log.seen.length, n, 'no message handled twice');
        assert.ok(mostActive <= concurrency, `${mostActive} handlers at once`);
        // Twice the slots besides the messages whose finish travels; where claims overlap, one answer more ahead.
        const most = (storeOf(h.client).capabilities.overlapClaims ? 3 : 2) * slots;
        assert.ok(mostHeld <= most, `${mostHeld} messages held at once`);
        assert.equal(watch.most, 1, 'claims in flight at once');
        assert.ok(Math.max(...watch.sizes) <= slots, `a claim for ${Math.max(...watch.sizes)}`);
      },
    );

    storeTest(
      fixture,
      'quick handlers: the next claim leaves as an answer arrives; once handlers run long, claims wait for slots',
      async (h) => {
        const q = h.queue('claims-overlap');
        const concurrency = 16;
        await fill(h, q, 100);
        const watch = watchClaims(h, q);
        const later = gate();
        const log = new JobLog();
        const worker = h.worker(
          q,
          async (job) => {
            log.record(job);
            if (Number(job.payload) >= 2 * concurrency) await later.opened;
          },
          { concurrency },
        );
        // m0..m15, then m16..m31 (claimed once m0..m15 returned: nothing is known of the handlers before); as
        // m16..m31 arrive the claim of m32..m47 leaves, and as those arrive, the claim of m48..m63, while m32..m47
        // hang. m48..m63 find no free slot (a handler ran long) and wait; no claim leaves while they do.
        await log.count(3 * concurrency);
        await waitFor(() => watch.sizes.length === 4 && worker.inFlight === 2 * concurrency, {
          what: () => `4 claims and 32 held (now ${watch.sizes.length} and ${worker.inFlight})`,
        });
        await quietPeriod(100);
        assert.deepEqual(watch.sizes, [concurrency, concurrency, concurrency, concurrency]);
        assert.equal(log.seen.length, 3 * concurrency, 'a message started beyond the free slots');
        assert.equal(worker.inFlight, 2 * concurrency);
        assert.equal(watch.most, 1);
        later.open();
        await log.count(100);
      },
      { capability: 'overlapClaims' },
    );

    storeTest(
      fixture,
      'quick handlers at the end of a backlog: an answer short of what was asked sends no claim ahead',
      async (h) => {
        const q = h.queue('claims-short');
        const concurrency = 16;
        const rest = 5;
        await fill(h, q, concurrency + rest);
        const watch = watchClaims(h, q);
        const log = new JobLog();
        h.worker(q, (job) => log.record(job), { concurrency });
        // m0..m15, then m16..m20, 5 of the 16 asked for: the queue is likely drained, so no claim for 5 more leaves
        // as they arrive (it would come back empty); the next claims are those the free slots make.
        await log.count(concurrency + rest);
        await quietPeriod(200);
        assert.ok(!watch.sizes.includes(rest), `claims for ${watch.sizes.join(', ')} messages`);
      },
      { capability: 'overlapClaims' },
    );

    storeTest(
      fixture,
      'a stop while the claim sent ahead travels gives its messages back to the queue',
      async (h) => {
        const q = h.queue('claims-stop-ahead');
        const n = 100;
        await fill(h, q, n);
        const answer = gate();
        const watch = watchClaims(h, q, { claim: 3, until: answer.opened });
        const log = new JobLog();
        const worker = h.worker(q, (job) => log.record(job), { concurrency: 16 });
        // m0..m15, m16..m31, and the claim of m32..m47 sent as m16..m31 arrived, its answer held back.
        await waitFor(() => watch.sizes.length === 3 && log.seen.length === 32, {
          what: () => `3 claims and 32 handled (now ${watch.sizes.length} and ${log.seen.length})`,
        });
        const stopping = worker.stop();
        answer.open();
        await stopping;
        assert.deepEqual(watch.sizes, [16, 16, 16], 'no claim left once the worker was stopping');
        assert.equal(log.seen.length, 32, 'no message of the answer that came during the stop was handled');
        await assertGaveBack(h, q, worker, n, 32);
      },
      { capability: 'overlapClaims' },
    );

    storeTest(
      fixture,
      'a monitor that stops the worker as the next claim left: the messages of that claim go back to the queue',
      async (h) => {
        const q = h.queue('claims-monitor-stop');
        const n = 100;
        await fill(h, q, n);
        const watch = watchClaims(h, q);
        const log = new JobLog();
        let answers = 0;
        const stops: Promise<void>[] = [];
        const worker = h.worker(q, (job) => log.record(job), {
          concurrency: 16,
          // The second answer: the claim of m32..m47 left before this call (m0..m15 returned before it came).
          monitor: (info) => {
            if (info.claimed.length > 0 && ++answers === 2) stops.push(worker.stop());
          },
        });
        await waitFor(() => stops.length > 0, { what: 'the second answer' });
        await Promise.all(stops);
        assert.deepEqual(watch.sizes, [16, 16, 16]);
        assert.equal(log.seen.length, 32, 'the messages of the first two answers were handled, and only those');
        await assertGaveBack(h, q, worker, n, 32);
      },
      { capability: 'overlapClaims' },
    );

    storeTest(fixture, 'claims in a row keep priority order: every higher priority starts first', async (h) => {
      const q = h.queue('claims-priority');
      const each = 60;
      await h.client.enqueueBatch(q, [
        ...Array.from({ length: each }, (_, i) => ({ payload: i, id: `low${i}`, priority: 5 })),
        ...Array.from({ length: each }, (_, i) => ({ payload: i, id: `high${i}`, priority: 1 })),
      ]);
      const log = new JobLog();
      h.worker(q, (job) => log.record(job), { concurrency: 16 });
      await log.count(2 * each);
      // Order within one priority is each store's own (etcd's dispatcher hands a batch out of order).
      const started = log.ids();
      const high = (id: string): boolean => id.startsWith('high');
      assert.ok(
        started.slice(0, each).every(high),
        `a low priority started among the first ${each}: ${started.join(' ')}`,
      );
      assert.ok(!started.slice(each).some(high));
    });
  });
}
