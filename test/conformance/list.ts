/** list(): pages of messages by state from each store's indexes, and the checks on its arguments. */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { storeTest } from '../support/harness.js';
import { waitForStatus } from '../support/jobs.js';
import { listAll } from '../support/list-pages.js';
import type { ListedMessage, ListOptions } from '../../src/index.js';
import type { StoreFixture } from '../support/fixture.js';

const LONG_MS = 60_000;

function ids(messages: readonly ListedMessage[]): string[] {
  return messages.map((m) => m.id).sort();
}

export function list(fixture: StoreFixture): void {
  void describe('list', () => {
    storeTest(fixture, 'lists by state and outcome, page by page, each message once', async (h) => {
      const q = h.queue('list');
      await h.client.configure(q, { filterEnums: { size: ['s', 'l'] } });
      const worker = h.worker(q, (job) => (job.id.startsWith('f') ? { status: 'error', error: 'no' } : undefined));
      const failedIds = ['f1', 'f2', 'f3'];
      for (const id of failedIds) await h.client.enqueue(q, { id }, { id, filters: { size: 's' } });
      await h.client.enqueue(q, 'x', { id: 'ok' });
      for (const id of failedIds) await waitForStatus(h.client, q, id, 'failed');
      await waitForStatus(h.client, q, 'ok', 'done-awaiting-gc');
      await worker.stop();
      const queuedIds = ['q1', 'q2', 'q3', 'q4', 'q5'];
      await h.client.enqueueBatch(
        q,
        queuedIds.map((id) => ({ payload: id, id })),
      );
      const laterIds = ['b1', 'b2'];
      for (const id of laterIds) await h.client.enqueue(q, id, { id, initialBackoffMs: LONG_MS });

      const failed = await listAll(h.client, q, { state: 'failed', limit: 2 });
      assert.deepEqual(ids(failed), failedIds);
      for (const m of failed) {
        assert.deepEqual(m, await h.client.status(q, m.id), 'a listed status is what status() says');
        assert.equal('payload' in m, false, 'no payload unless asked');
      }
      assert.deepEqual(ids(await listAll(h.client, q, { state: 'queued', limit: 2 })), queuedIds);
      assert.deepEqual(ids(await listAll(h.client, q, { state: 'queued-with-backoff', limit: 1 })), laterIds);
      assert.deepEqual(ids(await listAll(h.client, q, { state: 'done-awaiting-gc' })), ['ok']);
      assert.deepEqual(ids(await listAll(h.client, q, { state: 'locked' })), []);
      assert.deepEqual(
        ids(await listAll(h.client, q, { states: ['failed', 'queued-with-backoff'], limit: 3 })),
        [...laterIds, ...failedIds].sort(),
      );
      assert.deepEqual(
        ids(await listAll(h.client, q, { limit: 4 })),
        [...failedIds, 'ok', ...queuedIds, ...laterIds].sort(),
      );
      assert.deepEqual(ids(await listAll(h.client, q, { outcome: 'error' })), failedIds);
      assert.deepEqual(ids(await listAll(h.client, q, { outcome: 'success' })), ['ok']);

      const withPayload = await h.client.list(q, { state: 'failed', limit: 1000, payload: true });
      assert.equal(withPayload.cursor, null, 'a page shorter than its limit is the last');
      const f1 = withPayload.messages.find((m) => m.id === 'f1');
      assert.deepEqual(f1?.payload, { id: 'f1' });
      assert.deepEqual(f1.filters, { size: 's' });
      assert.deepEqual(f1.metadata, {});
      assert.equal(f1.state, 'failed');
    });

    storeTest(fixture, 'list of an unknown queue is an empty last page', async (h) => {
      assert.deepEqual(await h.client.list(h.queue('none')), { messages: [], cursor: null });
    });

    storeTest(fixture, 'bad states, limits and cursors are TypeErrors that say what is allowed', async (h) => {
      const q = h.queue('list-bad');
      await h.client.enqueueBatch(q, [
        { payload: 1, id: 'a' },
        { payload: 2, id: 'b' },
      ]);
      const bad: [ListOptions, RegExp][] = [
        [{ state: 'broken' as never }, /state "broken" is not one of queued, .*failed/],
        [{ states: [] }, /non-empty array/],
        [{ state: 'queued', states: ['failed'] }, /'state' or 'states', not both/],
        [{ outcome: 'meh' as never }, /outcome "meh" is not one of success, error, retry/],
        [{ limit: 0 }, /limit must be a whole number from 1 to 1000/],
        [{ limit: 1001 }, /limit must be a whole number from 1 to 1000/],
        [{ limit: 2.5 }, /limit must be a whole number/],
        [{ cursor: 'not a cursor!' }, /cursor/],
        [{ cursor: 'AAAA' }, /cursor is not one a previous page of this listing returned/],
        [{ colour: 'red' } as never, /unknown option 'colour'/],
      ];
      for (const [options, message] of bad) {
        await assert.rejects(h.client.list(q, options), (error: unknown) => {
          assert.ok(error instanceof TypeError, `${JSON.stringify(options)} gives a TypeError`);
          assert.match(error.message, message);
          return true;
        });
      }
      const first = await h.client.list(q, { state: 'queued', limit: 1 });
      assert.ok(first.cursor !== null);
      await assert.rejects(h.client.list(q, { state: 'failed', limit: 1, cursor: first.cursor }), TypeError);
      await assert.rejects(h.client.list('bad queue!', {}), /queue name/);
      await assert.rejects(h.client.retry(q, 'bad id!'), /message id/);
      // Nothing accepted was touched by any of it.
      assert.equal((await h.client.queueStatus(q)).counts.queued, 2);
    });
  });
}
