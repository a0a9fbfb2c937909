/**
 * A message handed to the same consumer again while that consumer's write about its last run (the finish, or a
 * renewal that comes too late) is still on its way back: the write's answer must not take the new delivery with it.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { storeOf } from '../src/client/client-store.js';
import { sleep } from '../src/model/time.js';
import type { Client } from '../src/index.js';
import { STALE_LOCK_GRACE_MS } from '../src/stores/etcd/dispatcher/plan.js';
import { QueueKeys } from '../src/stores/etcd/keys.js';
import type { Kv, TxnRequest } from '../src/stores/etcd/kv.js';
import { decodeRecord } from '../src/stores/etcd/record.js';
import { EtcdStore } from '../src/stores/etcd/store.js';
import { closedAfterAll, isolatedUrl } from './fixtures/etcd-support.js';
import { interposed } from './support/interposed.js';
import { JobLog } from './support/jobs.js';
import { waitFor } from './support/wait.js';

const opened = closedAfterAll();

/** Whether message `id` of `keys` is locked at `attempt`, as etcd has it now. */
async function lockedAt(kv: Kv, keys: QueueKeys, id: string, attempt: number): Promise<boolean> {
  const item = (await kv.range({ key: keys.record(id) })).kvs[0];
  const record = item === undefined ? null : decodeRecord(item.value);
  return record?.phase === 'locked' && record.attempt === attempt;
}

/** A client on its own root, its store, queue `q`'s keys and the store's own `Kv`, before a test interposes. */
async function opening(q: string): Promise<{ client: Client; store: EtcdStore; keys: QueueKeys; own: Kv }> {
  const client = await opened.client(isolatedUrl());
  const store = storeOf(client);
  assert.ok(store instanceof EtcdStore);
  return { client, store, keys: new QueueKeys(store.root, q), own: store.kv };
}

void describe('etcd: a delivery made while the last finish is answered', () => {
  void test('the new run reaches the worker, not only its lock', { timeout: 60_000 }, async () => {
    const q = 'again';
    const { client, store, keys, own } = await opening(q);
    let redelivered = false;
    const log = new JobLog();
    // The finish of run 1 commits at once, but its answer comes back only once this process's dispatcher has
    // handed the message, queued again, to the same consumer (run 2 locked): the window a busy event loop gives.
    Object.defineProperty(store, 'kv', {
      value: interposed(own, {
        async txn(request: TxnRequest) {
          const result = await own.txn(request);
          // Once run 1 was handled, the next write fenced on the message's record is its finish.
          const finishesRun1 =
            log.seen.length === 1 && request.compare.some((c) => c.key === keys.record('m') && c.target === 'mod');
          if (finishesRun1 && !redelivered) {
            await waitFor(() => lockedAt(own, keys, 'm', 2), {
              what: 'run 2 locked to the consumer',
              timeoutMs: 10_000,
            });
            redelivered = true;
          }
          return result;
        },
      }),
    });
    const worker = client.worker(
      q,
      (job) => {
        log.record(job);
        return job.attempt === 1 ? { status: 'retry', backoffMs: 0, error: 'again' } : undefined;
      },
      { lockMs: 60_000 },
    );
    try {
      await client.enqueue(q, 'x', { id: 'm' });
      // Before, run 2 stayed locked to the consumer and unseen by its worker until its lock ran out.
      await log.count(2, { timeoutMs: 10_000 });
      assert.equal(redelivered, true, 'run 2 was delivered before the finish of run 1 was answered');
      assert.deepEqual(
        log.seen.map((s) => `${s.id}#${s.attempt}`),
        ['m#1', 'm#2'],
      );
    } finally {
      await worker.stop();
    }
  });

  void test('a renewal that comes too late leaves the new run to the worker', { timeout: 60_000 }, async () => {
    const q = 'late-renewal';
    const { client, store, keys, own } = await opening(q);
    let held = false;
    let answered = false;
    const log = new JobLog();
    // Run 1's renewal is held, as a partition would hold it, until its lock has ended, the dispatcher has waited
    // out its grace for a silent holder and handed the message to the only consumer there is, the same one, again
    // (run 2 locked); then the renewal reaches etcd, and fails. Run 1's handler ignores its signal and keeps the
    // worker's one slot until a while after that answer, so run 2 waits in the consumer's inbox meanwhile.
    Object.defineProperty(store, 'kv', {
      value: interposed(own, {
        async txn(request: TxnRequest) {
          const renewsRun1 =
            log.seen.length === 1 && request.compare.some((c) => c.key === keys.record('m') && c.target === 'mod');
          if (renewsRun1 && !held) {
            held = true;
            await waitFor(() => lockedAt(own, keys, 'm', 2), {
              what: 'run 2 locked to the consumer',
              timeoutMs: STALE_LOCK_GRACE_MS + 10_000,
            });
            const result = await own.txn(request);
            answered = true;
            return result;
          }
          return own.txn(request);
        },
      }),
    });
    const worker = client.worker(
      q,
      async (job) => {
        log.record(job);
        if (job.attempt === 1) {
          await waitFor(() => answered, { what: 'the late renewal answered', timeoutMs: STALE_LOCK_GRACE_MS + 20_000 });
          await sleep(500);
        }
      },
      { lockMs: 1500 },
    );
    try {
      await client.enqueue(q, 'x', { id: 'm' });
      // Before, the renewal's answer took run 2 from the inbox: it stayed locked to the consumer, unseen, until its
      // lock and the grace ran out, and ran as run 3 (an attempt spent on no run, which maxDeliveries counts).
      await log.count(2, { timeoutMs: STALE_LOCK_GRACE_MS + 30_000 });
      assert.equal(held, true, 'a renewal of run 1 was held');
      assert.deepEqual(
        log.seen.map((s) => `${s.id}#${s.attempt}`),
        ['m#1', 'm#2'],
      );
    } finally {
      await worker.stop();
    }
  });
});
