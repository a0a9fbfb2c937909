/**
 * The counts queueStatus reads on etcd (src/stores/etcd/counts.ts): a base and one slot per writer, each slot put in
 * the Txn of the transitions it counts. Each check reads every record and the counts in one Txn, so at one
 * revision, and requires them equal, while writers run and after: two clients with lock expiries, retries,
 * removes, promotes and GC, a slot fold, clear, dead-letter moves, a client killed mid-run, a queue written
 * before counts existed, queues dispatched inside kvmq serve, a schedule's chunked firing and debounce bursts.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { Client, Handler } from '../src/index.js';
import type { EtcdStore } from '../src/stores/etcd/store.js';
import { prefixEnd } from '../src/stores/etcd/kv.js';
import { decodeRecord, stateOf } from '../src/stores/etcd/record.js';
import { countBaseKey, countReads, countSlotsPrefix, sumCounts, type Counts } from '../src/stores/etcd/counts.js';
import { foldCounts } from '../src/stores/etcd/count-read.js';
import { MESSAGE_STATES, type EnqueueResult, type MessageState } from '../src/model/types.js';
import type { NewMessage } from '../src/stores/contract/contract.js';
import { plainMessage } from '../src/stores/contract/new-message.js';
import { spawnChild } from './support/child.js';
import { waitFor } from './support/wait.js';
import { closedAfterAll, isolatedUrl } from './fixtures/etcd-support.js';
import { startServe } from './fixtures/serve-support.js';

const TIMEOUT_MS = 120_000;
const opened = closedAfterAll();
const client = (url: string): Promise<Client> => opened.client(url);

const store = (url: string): Promise<EtcdStore> => opened.store(url);

interface Snapshot {
  readonly counts: Counts | null;
  /** From the records themselves. */
  readonly truth: Counts;
  readonly states: Record<MessageState, number>;
}

/** The records and the counts of a queue, read in one Txn (one revision). */
async function snapshot(s: EtcdStore, queue: string): Promise<Snapshot> {
  const keys = s.keys(queue);
  const res = await s.kv.txn({
    compare: [],
    success: [{ type: 'range', key: keys.records, end: prefixEnd(keys.records) }, ...countReads(keys)],
  });
  const [records, base, slots] = res.responses.map((r) => (r.type === 'range' ? r.kvs : []));
  const truth = { live: 0, done: 0, failed: 0, stuck: 0 };
  const states = Object.fromEntries(MESSAGE_STATES.map((st) => [st, 0])) as Record<MessageState, number>;
  const now = Date.now();
  for (const item of records ?? []) {
    const r = decodeRecord(item.value);
    assert.ok(r !== null, `${item.key} is a record`);
    if (r.phase === 'pending' || r.phase === 'locked') truth.live += 1;
    if (r.phase === 'done') truth.done += 1;
    if (r.phase === 'failed') truth.failed += 1;
    if (r.phase === 'failed' && r.payloadKey !== null) truth.stuck += 1;
    states[stateOf(r, now)] += 1;
  }
  return { counts: sumCounts(base ?? [], slots ?? []), truth, states };
}

async function assertCounted(s: EtcdStore, queue: string, when: string): Promise<Snapshot> {
  const snap = await snapshot(s, queue);
  assert.deepEqual(snap.counts, snap.truth, `${queue}: counts against the records, ${when}`);
  return snap;
}

/** Checks the counts against the records every few ms until stopped; returns how many checks passed. */
function sampling(s: EtcdStore, queues: readonly string[]): { stop: () => Promise<number> } {
  let running = true;
  let checks = 0;
  const loop = (async () => {
    while (running) {
      for (const q of queues) {
        // An empty queue is counted from its first queueStatus with something to count.
        if ((await snapshot(s, q)).counts === null) await s.queueStatus(q);
        else await assertCounted(s, q, 'while writers run');
      }
      checks += 1;
      await new Promise((resolve) => setTimeout(resolve, 15));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return checks;
    },
  };
}

/** The message number of an id `{tag}-{n}`. */
const numberOf = (id: string): number => Number(id.split('-').at(-1));

/** Mixed outcomes by message number: retry once, fail, succeed with a backoff, or succeed. */
const mixed: Handler = async (job) => {
  const n = numberOf(job.id);
  await new Promise((resolve) => setTimeout(resolve, n % 5));
  if (n % 4 === 1 && job.attempt === 1) return { status: 'retry', backoffMs: 20, error: 'again' };
  if (n % 7 === 3) return { status: 'error', error: 'no' };
  if (n % 6 === 5) return { status: 'success', backoffMs: 60_000 };
  return undefined;
};

/** Waits until nothing of the queue runs or waits (queued, locked, in a backoff). */
async function drained(c: Client, queue: string, timeoutMs = 60_000): Promise<void> {
  await waitFor(
    async () => {
      const { counts } = await c.queueStatus(queue);
      const busy =
        counts.queued +
        counts.locked +
        counts['locked-with-requeue'] +
        counts['queued-with-backoff'] +
        counts['done-with-requeue'];
      return busy === 0 ? true : null;
    },
    { timeoutMs, what: `queue ${queue} drained` },
  );
}

/** A message as the client makes it (schedule firings take them ready-made). */
function newMessage(id: string, extra: Partial<NewMessage> = {}): NewMessage {
  return plainMessage(id, Buffer.from(JSON.stringify(id)), extra);
}

const actions = (results: readonly EnqueueResult[]): Record<string, number> => {
  const by: Record<string, number> = {};
  for (const r of results) {
    const key = r.ok ? r.action : 'refused';
    by[key] = (by[key] ?? 0) + 1;
  }
  return by;
};

void describe('etcd counts', () => {
  void test(
    'two clients, lock expiries, retries, removes, promotes, GC and a fold: counts equal the records',
    { timeout: TIMEOUT_MS },
    async () => {
      const url = isolatedUrl('?leaseTtlMs=2000');
      const s = await store(url);
      const q = 'mixed';
      const a = await client(url);
      const b = await client(url);
      await a.configure(q, { gcLifetimeMs: 1, maxDeliveries: 0 });
      await a.queueStatus(q);
      const sampler = sampling(s, [q]);
      a.worker(q, mixed, { concurrency: 4, lockMs: 1000, eoqBackoffMs: 20 });
      b.worker(q, mixed, { concurrency: 4, lockMs: 1000, eoqBackoffMs: 20 });

      // A worker in another process takes a message and freezes past its lock: ours take it over.
      const dir = mkdtempSync(join(tmpdir(), 'kvmq-counts-'));
      const resume = join(dir, 'resume');
      const stalled = spawnChild('worker-process.ts', [url, q, 'stall', '400', resume]);
      try {
        await stalled.line(/^ready /);
        for (let round = 0; round < 4; round++) {
          const base = round * 100;
          await Promise.all([
            a.enqueueBatch(
              q,
              Array.from({ length: 40 }, (_, i) => ({ payload: i, id: `a-${base + i}` })),
            ),
            ...Array.from({ length: 20 }, (_, i) => b.enqueue(q, i, { id: `b-${base + 40 + i}` })),
            // Waiting in a backoff; duplicates refused.
            b.enqueueBatch(
              q,
              Array.from({ length: 10 }, (_, i) => ({ payload: i, id: `w-${base + 60 + i}`, initialBackoffMs: 300 })),
            ),
            a.enqueue(q, 'dup', { id: `a-${base}` }),
          ]);
          if (round === 1) {
            await stalled.line(/^claimed /);
            // Past its lock: the message goes to another consumer; the late outcome is refused.
            await new Promise((resolve) => setTimeout(resolve, 1200));
            writeFileSync(resume, '');
            await stalled.line(/^resumed /);
          }
          const parked = await a.list(q, { state: 'queued-with-backoff', limit: 6 });
          const [first, second, ...rest] = parked.messages;
          if (first !== undefined) await b.promote(q, first.id);
          if (second !== undefined) await a.remove(q, second.id);
          for (const m of rest) await b.remove(q, m.id);
          const failed = await a.list(q, { state: 'failed', limit: 3 });
          for (const m of failed.messages) await b.retry(q, m.id);
          await a.retryFailed(q);
          await foldCounts(s.kv, s.keys(q), Date.now() + 120_000);
          await a.gc(q);
        }
        await drained(a, q);
      } finally {
        await stalled.kill('SIGKILL');
        rmSync(dir, { recursive: true, force: true });
      }
      const failed = await b.list(q, { state: 'failed', limit: 5 });
      for (const m of failed.messages) await a.remove(q, m.id);
      await a.gc(q);
      const checks = await sampler.stop();
      assert.ok(checks > 3, `checked while running (${checks})`);
      const snap = await assertCounted(s, q, 'after the run');
      assert.ok(snap.truth.done > 0 && snap.truth.failed > 0, 'the run left done and failed messages');
      const status = await a.queueStatus(q);
      assert.deepEqual(status.counts, snap.states, 'queueStatus against the records');
    },
  );

  void test(
    'clear resets the counts; writers whose slots went count on from zero',
    { timeout: TIMEOUT_MS },
    async () => {
      const url = isolatedUrl();
      const s = await store(url);
      const q = 'cleared';
      const a = await client(url);
      const b = await client(url);
      await a.queueStatus(q);
      b.worker(q, mixed, { concurrency: 4, eoqBackoffMs: 20 });
      const sampler = sampling(s, [q]);
      const enqueue = (c: Client, tag: string, from: number): Promise<unknown> =>
        c.enqueueBatch(
          q,
          Array.from({ length: 30 }, (_, i) => ({ payload: i, id: `${tag}-${from + i}` })),
        );
      await Promise.all([enqueue(a, 'a', 0), enqueue(b, 'b', 0)]);
      await Promise.all([a.clear(q), enqueue(b, 'b', 100)]);
      await Promise.all([enqueue(a, 'a', 200), enqueue(b, 'b', 200)]);
      await drained(a, q);
      await sampler.stop();
      const snap = await assertCounted(s, q, 'after clear and more work');
      assert.ok(snap.truth.done + snap.truth.failed >= 60, 'the work after the clear is counted');
      await a.clear(q);
      const empty = await assertCounted(s, q, 'after a clear of a still queue');
      assert.deepEqual(empty.truth, { live: 0, done: 0, failed: 0, stuck: 0 });
      assert.equal((await a.queueStatus(q)).total, 0);
    },
  );

  void test('dead-letter moves count in both queues', { timeout: TIMEOUT_MS }, async () => {
    const url = isolatedUrl();
    const s = await store(url);
    const q = 'source';
    const dead = 'dead';
    const a = await client(url);
    await a.configure(q, { deadLetterQueue: dead });
    await a.queueStatus(q);
    await a.queueStatus(dead);
    const sampler = sampling(s, [q, dead]);
    a.worker(q, (job) => (numberOf(job.id) % 2 === 0 ? { status: 'error', error: 'to the dead' } : undefined), {
      concurrency: 4,
      eoqBackoffMs: 20,
    });
    await a.enqueueBatch(
      q,
      Array.from({ length: 40 }, (_, i) => ({ payload: i, id: `m-${i}` })),
    );
    await drained(a, q);
    await sampler.stop();
    await assertCounted(s, q, 'after the moves');
    const moved = await assertCounted(s, dead, 'after the moves');
    assert.equal(moved.truth.live, 20);
    assert.equal((await a.queueStatus(dead)).counts.queued, 20);
  });

  void test('a client killed mid-run leaves exact counts', { timeout: TIMEOUT_MS }, async () => {
    const url = isolatedUrl('?leaseTtlMs=2000');
    const s = await store(url);
    const q = 'killed';
    const a = await client(url);
    await a.queueStatus(q);
    a.worker(q, mixed, { concurrency: 4, eoqBackoffMs: 20 });
    const sampler = sampling(s, [q]);
    for (const round of [0, 1]) {
      const child = spawnChild('counts-process.ts', [url, q, `k${round}`]);
      try {
        await child.line(/^progress 6$/, 60_000);
      } finally {
        await child.kill('SIGKILL');
      }
    }
    await drained(a, q);
    await sampler.stop();
    const snap = await assertCounted(s, q, 'after the kills');
    assert.ok(snap.truth.done > 100, 'the children did work');
    assert.deepEqual((await a.queueStatus(q)).counts, snap.states);
  });

  void test('a queue written before counts is recounted once, then counted', { timeout: TIMEOUT_MS }, async () => {
    const url = isolatedUrl();
    const s = await store(url);
    const q = 'old';
    const keys = s.keys(q);
    const a = await client(url);
    const worker = a.worker(q, mixed, { concurrency: 4, eoqBackoffMs: 20 });
    await a.enqueueBatch(
      q,
      Array.from({ length: 40 }, (_, i) => ({ payload: i, id: `o-${i}` })),
    );
    await drained(a, q);
    await worker.stop();
    await a.enqueueBatch(
      q,
      Array.from({ length: 10 }, (_, i) => ({ payload: i, id: `p-${i}` })),
    );
    // As an older kvmq left it: no base, no slots.
    const slots = countSlotsPrefix(keys);
    await s.kv.txn({
      compare: [],
      success: [
        { type: 'delete', key: countBaseKey(keys) },
        { type: 'delete', key: slots, end: prefixEnd(slots) },
      ],
    });
    assert.equal((await snapshot(s, q)).counts, null, 'not counted');
    // A queue with nothing to count is left without a key.
    assert.equal((await a.queueStatus('unknown')).total, 0);
    const unknown = s.keys('unknown').prefix;
    assert.equal((await s.kv.range({ key: unknown, end: prefixEnd(unknown), countOnly: true })).count, 0);
    const before = await snapshot(s, q);
    assert.deepEqual((await a.queueStatus(q)).counts, before.states, 'the recount');
    await assertCounted(s, q, 'after the recount');
    a.worker(q, mixed, { concurrency: 4, eoqBackoffMs: 20 });
    await a.enqueueBatch(
      q,
      Array.from({ length: 20 }, (_, i) => ({ payload: i, id: `o-${100 + i}` })),
    );
    await drained(a, q);
    await assertCounted(s, q, 'counted on after the recount');
  });

  void test(
    'a chunked schedule firing over existing ids and debounce bursts keep exact counts',
    { timeout: TIMEOUT_MS },
    async () => {
      const url = isolatedUrl();
      const s = await store(url);
      const q = 'scheduled';
      const a = await client(url);
      const b = await client(url);
      await a.queueStatus(q);
      // Done ones (revived by the firing) and ones waiting in a backoff (refused by it).
      a.worker(q, () => undefined, { concurrency: 4, eoqBackoffMs: 20 });
      await a.enqueueBatch(
        q,
        Array.from({ length: 10 }, (_, i) => ({ payload: i, id: `slot-${i}` })),
      );
      await drained(a, q);
      await b.enqueueBatch(
        q,
        Array.from({ length: 10 }, (_, i) => ({ payload: i, id: `slot-${10 + i}`, initialBackoffMs: 60_000 })),
      );
      // A debounce id whose waiting message a firing's message replaces.
      const held = await a.enqueue(q, 'first', { id: 'held-0', debounce: { id: 'held', ms: 60_000 } });
      assert.deepEqual(held, { ok: true, id: 'held-0', action: 'added' });
      const sampler = sampling(s, [q]);

      // More messages than one Txn takes: the firing goes in chunks, each with its count slot.
      const schedule = { name: 'every', body: '{}', nextAt: 1000 };
      assert.equal(await s.putSchedule(q, schedule), true);
      const slots = Array.from({ length: 150 }, (_, i) => newMessage(`slot-${i}`, { priority: i % 3 }));
      const fired = await s.fireSchedule(q, schedule, 2000, [
        ...slots,
        newMessage('held-1', { debounceId: 'held', initialBackoffMs: 60_000 }),
      ]);
      assert.ok(fired !== null, 'the firing happened');
      assert.deepEqual(actions(fired), { revived: 10, refused: 10, added: 130, debounced: 1 });
      await assertCounted(s, q, 'after the firing');
      // Fired again from the old expectation: nothing is written.
      assert.equal(await s.fireSchedule(q, schedule, 3000, slots), null);

      // Bursts on a few debounce ids from two clients at once: replacements change no count.
      const bursts = await Promise.all(
        Array.from({ length: 60 }, (_, n) =>
          (n % 2 === 0 ? a : b).enqueue(q, n, { debounce: { id: `user-${n % 4}`, ms: 150 } }),
        ),
      );
      assert.ok(
        bursts.some((r) => r.ok && r.action === 'debounced'),
        'some enqueues replaced a waiting message',
      );
      await assertCounted(s, q, 'after the bursts');
      // The messages left waiting for a minute go; the rest run.
      const waiting = await a.list(q, { state: 'queued-with-backoff', limit: 100 });
      for (const m of waiting.messages)
        if (m.id.startsWith('slot-') || m.id.startsWith('held-')) await a.remove(q, m.id);
      await drained(a, q);
      const checks = await sampler.stop();
      assert.ok(checks > 1, `checked while running (${checks})`);
      const snap = await assertCounted(s, q, 'after the run');
      assert.ok(snap.truth.done >= 140, `the fired and debounced messages ran (${snap.truth.done} done)`);
      assert.deepEqual((await a.queueStatus(q)).counts, snap.states);
    },
  );

  void test('queues dispatched inside kvmq serve are counted the same', { timeout: TIMEOUT_MS }, async () => {
    const server = await startServe();
    opened.add(() => server.stop());
    const url = `etcd://${server.endpoint}/counts`;
    const s = await store(url);
    const q = 'served';
    const a = await client(url);
    const b = await client(url);
    await a.configure(q, { maxDeliveries: 0 });
    await a.queueStatus(q);
    const sampler = sampling(s, [q]);
    a.worker(q, mixed, { concurrency: 4, eoqBackoffMs: 20 });
    b.worker(q, mixed, { concurrency: 4, eoqBackoffMs: 20 });
    await Promise.all([
      a.enqueueBatch(
        q,
        Array.from({ length: 60 }, (_, i) => ({ payload: i, id: `a-${i}` })),
      ),
      b.enqueueBatch(
        q,
        Array.from({ length: 60 }, (_, i) => ({ payload: i, id: `b-${i}` })),
      ),
    ]);
    // A plain producer's put, moved by the server's dispatcher.
    await s.kv.txn({
      compare: [],
      success: [{ type: 'put', key: s.keys(q).producer('plain-1'), value: Buffer.from('x') }],
    });
    await drained(a, q);
    await sampler.stop();
    const snap = await assertCounted(s, q, 'after the run');
    assert.equal(snap.truth.done + snap.truth.failed, 121);
    assert.deepEqual((await a.queueStatus(q)).counts, snap.states);
  });
});
