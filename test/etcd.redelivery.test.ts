/**
 * A message handed to the same consumer again while that consumer's finish of its last run is still on its way
 * back: the finish's answer must not take the new delivery with it.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { storeOf } from '../src/client/client-store.js';
import { QueueKeys } from '../src/stores/etcd/keys.js';
import type { TxnRequest } from '../src/stores/etcd/kv.js';
import { decodeRecord } from '../src/stores/etcd/record.js';
import { EtcdStore } from '../src/stores/etcd/store.js';
import { closedAfterAll, isolatedUrl } from './fixtures/etcd-support.js';
import { interposed } from './support/interposed.js';
import { JobLog } from './support/jobs.js';
import { waitFor } from './support/wait.js';

const opened = closedAfterAll();

void describe('etcd: a delivery made while the last finish is answered', () => {
  void test('the new run reaches the worker, not only its lock', { timeout: 60_000 }, async () => {
    const client = await opened.client(isolatedUrl());
    const store = storeOf(client);
    assert.ok(store instanceof EtcdStore);
    const q = 'again';
    const keys = new QueueKeys(store.root, q);
    const own = store.kv;
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
            await waitFor(
              async () => {
                const item = (await own.range({ key: keys.record('m') })).kvs[0];
                const record = item === undefined ? null : decodeRecord(item.value);
                return record?.phase === 'locked' && record.attempt === 2;
              },
              { what: 'run 2 locked to the consumer', timeoutMs: 10_000 },
            );
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
});
