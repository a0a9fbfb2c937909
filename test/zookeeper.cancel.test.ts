/**
 * ZooKeeper's cancel as a plain client sees it: the note a cancel leaves under the holder's consumer node, heard
 * through the holder's child watch and removed, and GC taking a lapsed consumer with the notes it never heard.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { waitFor } from './support/wait.js';
import { freshStoreUrl, serverUrl } from './fixtures/zookeeper-env.js';
import { dirOf, fileClients } from './fixtures/zookeeper-clients.js';
import { storeOf } from '../src/client/client-store.js';
import type { CanceledMessage, Finish } from '../src/stores/contract/contract.js';

const server = serverUrl();
const { open, plain } = fileClients(server);

describe('zookeeper: cancel', () => {
  test("a held message's cancel is told to its holder's process with id and attempt; the note goes", async () => {
    const url = await freshStoreUrl(server);
    const holder = await open(url);
    const other = await open(url);
    const q = 'notes';
    const store = storeOf(holder);
    const heard: (CanceledMessage | null)[] = [];
    const unsubscribe = store.subscribeCancels(q, (canceled) => heard.push(canceled));
    await store.registerConsumer(q, { id: 'c/1', host: 'here', pid: 1, ttlMs: 90_000 });
    await holder.enqueue(q, 'x', { id: 'x' });
    const claimed = await store.claim(q, {
      consumerId: 'c/1',
      max: 1,
      lockMs: 90_000,
      accepts: null,
      eoqBackoffMs: () => 0,
    });
    assert.deepEqual(
      claimed.messages.map((m) => [m.id, m.attempt]),
      [['x', 1]],
    );
    assert.deepEqual(await other.cancel(q, 'x', 'gone'), { ok: true, id: 'x', state: 'failed' });
    await waitFor(() => heard.length > 0, { timeoutMs: 10_000, what: 'the holder hearing of the cancel' });
    assert.deepEqual(heard, [{ id: 'x', attempt: 1 }]);
    const p = await plain();
    const consumer = `${dirOf(url)}/${q}/consumers/c%2F1`;
    await waitFor(async () => (await p.children(consumer)).join() === 'current', { what: 'the note removed' });
    // The claim went in the cancel's multi: the holder's finish is refused as a stale holder's.
    const finish: Finish = { id: 'x', attempt: 1, outcome: 'success', error: null, backoffMs: 0, startedAt: 1 };
    assert.deepEqual(await store.finish(q, 'c/1', [finish]), ['lost']);
    assert.equal((await other.status(q, 'x'))?.lastError, 'canceled: gone');
    unsubscribe();
    await store.unregisterConsumer(q, 'c/1');
    assert.equal(await p.exists(consumer), null);
  });

  test('a message a finish claimed ahead for its consumer, canceled before collected, is never handed over', async () => {
    const url = await freshStoreUrl(server);
    const client = await open(url);
    const other = await open(url);
    const q = 'ahead';
    const store = storeOf(client);
    const heard: (CanceledMessage | null)[] = [];
    store.subscribeCancels(q, (canceled) => heard.push(canceled));
    await client.enqueueBatch(q, [
      { payload: 'a', id: 'a' },
      { payload: 'b', id: 'b' },
    ]);
    await store.registerConsumer(q, { id: 'c', host: 'here', pid: 1, ttlMs: 30_000 });
    const request = { consumerId: 'c', max: 1, lockMs: 30_000, accepts: null, eoqBackoffMs: () => 1000 };
    assert.deepEqual(
      (await store.claim(q, request)).messages.map((m) => m.id),
      ['a'],
    );
    // Asked after the claim's reads ahead on the same session: the finish can claim `b` with them.
    await client.status(q, 'b');
    const finish: Finish = { id: 'a', attempt: 1, outcome: 'success', error: null, backoffMs: 0, startedAt: null };
    assert.deepEqual(await store.finish(q, 'c', [finish]), ['ok']);
    assert.equal((await client.status(q, 'b'))?.consumer, 'c', 'claimed ahead for the consumer');
    assert.deepEqual(await other.cancel(q, 'b'), { ok: true, id: 'b', state: 'failed' });
    await waitFor(() => heard.length > 0, { timeoutMs: 10_000, what: 'the holder hearing of the cancel' });
    assert.deepEqual(heard, [{ id: 'b', attempt: 1 }]);
    assert.deepEqual((await store.claim(q, request)).messages, []);
    const status = await client.status(q, 'b');
    assert.deepEqual([status?.state, status?.lastError], ['failed', 'canceled']);
    await store.unregisterConsumer(q, 'c');
    assert.equal((await client.status(q, 'b'))?.state, 'failed');
  });

  test('GC removes a lapsed consumer with the cancel notes it never heard; a live one stays', async () => {
    const url = await freshStoreUrl(server);
    const client = await open(url);
    const q = 'lapsed';
    await client.enqueue(q, 'x', { id: 'x' });
    await storeOf(client).registerConsumer(q, { id: 'live', host: 'here', pid: 1, ttlMs: 90_000 });
    const p = await plain();
    const consumers = `${dirOf(url)}/${q}/consumers`;
    await p.create(`${consumers}/ghost`);
    await p.create(`${consumers}/ghost/canceled-3-x`);
    await storeOf(client).gc(q, true);
    assert.deepEqual(await p.children(consumers), ['live']);
  });
});
