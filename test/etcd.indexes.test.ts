/**
 * The etcd store's index keys (failed/, backoff/, refuse/, done/, stuck/) are written in the same Txn as
 * each record change, by producers, consumers, the dispatcher and the actions alike. Under a concurrent mix
 * of all of them, every entry must be one the record's current version has, and every record must have its
 * entries: counts and listings come from them.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Client } from '../src/index.js';
import type { EtcdStore } from '../src/stores/etcd/store.js';
import { prefixEnd } from '../src/stores/etcd/kv.js';
import { decodeRecord } from '../src/stores/etcd/record.js';
import { indexEntries } from '../src/stores/etcd/transitions.js';
import { waitFor } from './support/wait.js';
import { closedAfterAll, isolatedUrl } from './fixtures/etcd-support.js';

const TIMEOUT_MS = 90_000;
const opened = closedAfterAll();
const { client } = opened;

/** Every index entry of the queue against what its records say it should have. */
async function checkIndexes(store: EtcdStore, queue: string): Promise<void> {
  const keys = store.keys(queue);
  const records = await store.kv.range({ key: keys.records, end: prefixEnd(keys.records) });
  const expected = new Map<string, string>();
  for (const item of records.kvs) {
    const record = decodeRecord(item.value);
    assert.ok(record !== null, `${item.key} is a record`);
    const id = item.key.slice(keys.records.length);
    for (const entry of indexEntries(keys, id, record)) expected.set(entry.key, entry.value.toString('latin1'));
  }
  const found = new Map<string, string>();
  for (const index of [keys.doneIndex, keys.failedIndex, keys.backoffIndex, keys.refuseIndex, keys.stuckIndex]) {
    const res = await store.kv.range({ key: index, end: prefixEnd(index), revision: records.revision });
    for (const item of res.kvs) found.set(item.key, item.value.toString('latin1'));
  }
  assert.deepEqual([...found].sort(), [...expected].sort(), 'the index entries are exactly those of the records');
}

void describe('etcd index keys', () => {
  void test(
    'stay those of the records under concurrent enqueues, outcomes and actions',
    { timeout: TIMEOUT_MS },
    async () => {
      const url = isolatedUrl();
      const store = await opened.store(url);
      const q = 'mix';
      const producer = await client(url);
      const actor = await client(url);
      const workers: Client[] = [await client(url), await client(url)];
      let handled = 0;
      for (const [n, c] of workers.entries()) {
        c.worker(
          q,
          (job) => {
            handled += 1;
            const pick = (Number(job.id.slice(1)) + job.attempt + n) % 4;
            if (pick === 0) return { status: 'error', error: `failed ${job.id}` };
            if (pick === 1 && job.attempt < 3) return { status: 'retry', backoffMs: 20 };
            if (pick === 2) return { status: 'success', backoffMs: 200 };
            return undefined;
          },
          { concurrency: 8 },
        );
      }
      const ids = Array.from({ length: 200 }, (_, i) => `m${i}`);
      const enqueues = (async () => {
        for (let i = 0; i < ids.length; i += 20) {
          await producer.enqueueBatch(
            q,
            ids.slice(i, i + 20).map((id, j) => ({ id, payload: id, initialBackoffMs: j % 3 === 0 ? 50 : 0 })),
          );
        }
      })();
      const actions = (async () => {
        for (let round = 0; round < 20; round++) {
          const id = ids[(round * 7) % ids.length] ?? 'm0';
          await actor.retry(q, id);
          await actor.promote(q, ids[(round * 11) % ids.length] ?? 'm0');
          if (round % 5 === 0) await actor.remove(q, ids[(round * 13) % ids.length] ?? 'm0');
          await actor.retryFailed(q);
          // Allow requeues of finished ones too (done-with-backoff → requeued).
          await actor.enqueue(q, 'again', { id: ids[(round * 3) % ids.length] ?? 'm0', allowRequeue: true });
        }
      })();
      await Promise.all([enqueues, actions]);
      await waitFor(
        async () => {
          const status = await actor.queueStatus(q);
          return (
            status.counts.queued + status.counts.locked + status.counts['queued-with-backoff'] === 0 &&
            status.counts['locked-with-requeue'] + status.counts['done-with-requeue'] === 0 &&
            // Time-derived states stop moving too, so the counts and the listing below see the same states.
            status.counts['done-with-backoff'] === 0
          );
        },
        { what: 'the queue settled', timeoutMs: 60_000 },
      );
      assert.ok(handled > 0);
      await checkIndexes(store, q);
      // The counts from the indexes match the states the records give.
      const status = await actor.queueStatus(q);
      const listed = await actor.list(q, { limit: 1000 });
      const byState = new Map<string, number>();
      for (const m of listed.messages) byState.set(m.state, (byState.get(m.state) ?? 0) + 1);
      for (const [state, count] of Object.entries(status.counts)) {
        assert.equal(byState.get(state) ?? 0, count, `${state}: listed and counted alike`);
      }
    },
  );
});
