/** Batch consumption (worker option `batch`): sizes, the wait for a fuller batch, per-message outcomes, filters. */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import type { Job } from '../../src/index.js';
import { storeTest } from '../support/harness.js';
import { waitForStatus } from '../support/jobs.js';
import { gate, untilAborted, waitFor } from '../support/wait.js';
import type { StoreFixture } from '../support/fixture.js';

/** Each handler call's messages, as `id#attempt`. */
class BatchLog {
  readonly calls: string[][] = [];
  readonly at: number[] = [];

  record(jobs: readonly Job[]): void {
    this.calls.push(jobs.map((job) => `${job.id}#${job.attempt}`));
    this.at.push(Date.now());
  }

  sizes(): number[] {
    return this.calls.map((call) => call.length);
  }

  handled(): string[] {
    return this.calls.flat().sort();
  }
}

export function batch(fixture: StoreFixture): void {
  void describe('batch', () => {
    storeTest(fixture, 'batches of the requested size when enough are ready, each with its result', async (h) => {
      const q = h.queue('sizes');
      const numbers = h.client.queue<{ n: number }, number>(q);
      for (let n = 0; n < 10; n += 1) await numbers.enqueue({ n }, { id: `m${n}` });
      const log = new BatchLog();
      h.batchWorker<{ n: number }, number>(
        q,
        (jobs) => {
          log.record(jobs);
          return jobs.map((job) => ({ status: 'success', result: job.payload.n * 2 }));
        },
        { batch: { size: 4 } },
      );
      await waitFor(() => log.handled().length >= 10, { what: () => `10 handled (${JSON.stringify(log.calls)})` });
      assert.equal(log.sizes()[0], 4, `the first batch is full: ${JSON.stringify(log.calls)}`);
      assert.ok(log.sizes().every((size) => size <= 4));
      assert.deepEqual(log.handled(), [...Array(10).keys()].map((n) => `m${n}#1`).sort());
      for (let n = 0; n < 10; n += 1) {
        const status = await waitForStatus(h.client, q, `m${n}`, 'done-awaiting-gc');
        assert.equal(status.result, n * 2);
      }
    });

    storeTest(fixture, 'fewer than size: a partial batch after waitMs, a full one as soon as it fills', async (h) => {
      const q = h.queue('partial');
      await h.client.enqueue(q, 1, { id: 'a' });
      await h.client.enqueue(q, 2, { id: 'b' });
      const log = new BatchLog();
      const startedAt = Date.now();
      h.batchWorker(q, (jobs) => log.record(jobs), { batch: { size: 5, waitMs: 400 } });
      await waitFor(() => log.calls.length === 1);
      assert.deepEqual(log.calls[0]?.sort(), ['a#1', 'b#1']);
      assert.ok((log.at[0] ?? 0) - startedAt >= 350, `waited for a fuller batch: ${(log.at[0] ?? 0) - startedAt} ms`);

      const full = h.queue('fills');
      const filled = new BatchLog();
      h.batchWorker(full, (jobs) => filled.record(jobs), { batch: { size: 3, waitMs: 60_000 } });
      for (const id of ['x', 'y', 'z']) await h.client.enqueue(full, id, { id });
      await waitFor(() => filled.calls.length === 1, { timeoutMs: 20_000 });
      assert.deepEqual(filled.calls[0]?.sort(), ['x#1', 'y#1', 'z#1']);
    });

    storeTest(fixture, 'one outcome per message: the one that failed is retried alone', async (h) => {
      const q = h.queue('each');
      await h.client.enqueue(q, 'ok', { id: 'ok' });
      await h.client.enqueue(q, 'again', { id: 'again' });
      const log = new BatchLog();
      h.batchWorker(
        q,
        (jobs) => {
          log.record(jobs);
          return jobs.map((job) =>
            job.id === 'again' && job.attempt === 1
              ? { status: 'retry' as const, error: 'not yet' }
              : { status: 'success' as const, result: job.id },
          );
        },
        { batch: { size: 2 } },
      );
      const again = await waitForStatus(h.client, q, 'again', 'done-awaiting-gc');
      assert.equal(again.attempt, 2);
      assert.equal(again.result, 'again');
      const ok = await waitForStatus(h.client, q, 'ok', 'done-awaiting-gc');
      assert.equal(ok.attempt, 1);
      assert.deepEqual(log.calls[0]?.sort(), ['again#1', 'ok#1']);
      assert.deepEqual(log.calls.slice(1), [['again#2']]);
      const details = await h.client.show(q, 'again');
      assert.equal(details?.history[0]?.error, 'not yet');
    });

    storeTest(fixture, 'a thrown error retries every message of the batch under its own attempts', async (h) => {
      const q = h.queue('thrown');
      await h.client.enqueue(q, 1, { id: 'p' });
      await h.client.enqueue(q, 2, { id: 'q', attempts: 1 });
      const log = new BatchLog();
      h.batchWorker(
        q,
        (jobs) => {
          log.record(jobs);
          if (jobs.some((job) => job.attempt === 1)) throw new Error('batch broke');
        },
        { batch: { size: 2 }, maxAttempts: 2, retryBackoffMs: 0 },
      );
      // On etcd the second delivery sometimes waits a second or two for the dispatcher's answer; a loaded machine
      // stretches that past the default wait.
      const p = await waitForStatus(h.client, q, 'p', 'done-awaiting-gc', { timeoutMs: 20_000 });
      assert.equal(p.attempt, 2);
      // Its own attempts: one, so the thrown error is its last.
      const failed = await waitForStatus(h.client, q, 'q', 'failed');
      assert.equal(failed.attempt, 1);
      assert.match(failed.lastError ?? '', /batch broke/);
      assert.deepEqual(log.calls[0]?.sort(), ['p#1', 'q#1']);
    });

    storeTest(fixture, 'an array of the wrong length fails the batch as a thrown error, retried', async (h) => {
      const q = h.queue('length');
      await h.client.enqueue(q, 1, { id: 'r' });
      await h.client.enqueue(q, 2, { id: 's' });
      const log = new BatchLog();
      h.batchWorker(
        q,
        (jobs) => {
          log.record(jobs);
          return jobs[0]?.attempt === 1 ? [undefined] : undefined;
        },
        { batch: { size: 2 }, maxAttempts: 2, retryBackoffMs: 0 },
      );
      for (const id of ['r', 's']) {
        const status = await waitForStatus(h.client, q, id, 'done-awaiting-gc');
        assert.equal(status.attempt, 2);
        const details = await h.client.show(q, id);
        assert.match(details?.history[0]?.error ?? '', /returned 1 outcome\(s\) for a batch of 2/);
      }
      assert.deepEqual(log.calls[0]?.sort(), ['r#1', 's#1']);
    });

    storeTest(fixture, "a batch holds only messages the worker's filters accept", async (h) => {
      const q = h.queue('filtered');
      await h.client.configure(q, { filterEnums: { region: ['eu', 'us'] } });
      for (const id of ['eu1', 'eu2', 'eu3']) await h.client.enqueue(q, id, { id, filters: { region: 'eu' } });
      for (const id of ['us1', 'us2']) await h.client.enqueue(q, id, { id, filters: { region: 'us' } });
      const log = new BatchLog();
      h.batchWorker(q, (jobs) => log.record(jobs), { batch: { size: 10, waitMs: 200 }, filters: { region: 'eu' } });
      await waitFor(() => log.handled().length >= 3);
      await new Promise((resolve) => setTimeout(resolve, 500));
      assert.deepEqual(log.handled(), ['eu1#1', 'eu2#1', 'eu3#1']);
      for (const id of ['us1', 'us2']) assert.equal((await h.client.status(q, id))?.state, 'queued');
    });

    storeTest(fixture, 'concurrency counts batches: two run at once, a batch in priority order', async (h) => {
      const q = h.queue('slots');
      for (let n = 0; n < 6; n += 1) await h.client.enqueue(q, n, { id: `low${n}`, priority: 5 });
      for (const id of ['urgent0', 'urgent1']) await h.client.enqueue(q, id, { id, priority: 0 });
      const log = new BatchLog();
      let running = 0;
      let most = 0;
      const release = gate();
      h.batchWorker(
        q,
        async (jobs) => {
          log.record(jobs);
          running += 1;
          most = Math.max(most, running);
          await release.opened;
          running -= 1;
        },
        { batch: { size: 3 }, concurrency: 2 },
      );
      await waitFor(() => log.calls.length === 2, { what: () => `two batches (${JSON.stringify(log.calls)})` });
      assert.deepEqual(log.sizes(), [3, 3]);
      assert.deepEqual(log.calls[0]?.slice(0, 2).sort(), ['urgent0#1', 'urgent1#1']);
      release.open();
      await waitFor(() => log.handled().length === 8);
      assert.equal(most, 2, 'two batches ran at once, no more');
    });

    storeTest(fixture, "each message's lock is renewed while its batch runs", async (h) => {
      const q = h.queue('renewed');
      for (const id of ['l1', 'l2']) await h.client.enqueue(q, id, { id });
      const log = new BatchLog();
      h.batchWorker(
        q,
        async (jobs) => {
          log.record(jobs);
          await new Promise((resolve) => setTimeout(resolve, 1500));
          return jobs.map((job) => (job.signal.aborted ? { status: 'error' as const } : undefined));
        },
        { batch: { size: 2 }, lockMs: 500 },
      );
      for (const id of ['l1', 'l2'])
        assert.equal((await waitForStatus(h.client, q, id, 'done-awaiting-gc')).attempt, 1);
      assert.deepEqual(log.calls, [log.calls[0]]);
    });

    storeTest(fixture, 'a batch past timeoutMs fails each message, every signal aborted', async (h) => {
      const q = h.queue('timeout');
      for (const id of ['t1', 't2']) await h.client.enqueue(q, id, { id });
      const aborted: string[] = [];
      h.batchWorker(
        q,
        async (jobs) => {
          await Promise.all(jobs.map((job) => untilAborted(job.signal).then(() => aborted.push(job.id))));
        },
        { batch: { size: 2 }, timeoutMs: 200 },
      );
      for (const id of ['t1', 't2']) {
        const status = await waitForStatus(h.client, q, id, 'failed');
        assert.match(status.lastError ?? '', /timed out after 200 ms/);
      }
      assert.deepEqual(aborted.sort(), ['t1', 't2']);
    });

    storeTest(fixture, 'bad batch options are a TypeError naming the field', (h) => {
      const q = h.queue('bad');
      const handler = (): void => undefined;
      assert.throws(() => h.client.worker(q, handler, { batch: { size: 0 } }), /batch\.size/);
      assert.throws(() => h.client.worker(q, handler, { batch: { size: 2, waitMs: -1 } }), /batch\.waitMs/);
      assert.throws(
        () => h.client.worker(q, handler, { batch: { size: 2, wait: 5 } as never }),
        /unknown option 'wait'/,
      );
    });
  });
}
