/**
 * What a GC does to a SQL store's per-group rate state (groupRateLimit): a group whose next start is still to
 * come keeps its row, one whose time has come loses it (no row says the same), and the limit holds after.
 */
import assert from 'node:assert/strict';
import type { Client } from '../../src/index.js';
import { storeOf } from '../../src/client/client-store.js';

/** Runs the case on queue `gr` of `client`; `groupsStored` lists the groups the store keeps a rate row for. */
export async function checkGroupRateGc(client: Client, groupsStored: () => Promise<string[]>): Promise<void> {
  const claim = async (): Promise<string[]> => {
    const request = { consumerId: 'c1', max: 10, lockMs: 30_000, accepts: null, eoqBackoffMs: () => 50 };
    const result = await storeOf(client).claim('gr', request);
    return result.messages.map((m) => m.id).sort();
  };
  await client.configure('gr', { groupRateLimit: { max: 1, perMs: 300 } });
  await client.enqueueBatch('gr', [
    { payload: 1, id: 'x1', group: 'x' },
    { payload: 2, id: 'x2', group: 'x' },
    { payload: 3, id: 'y1', group: 'y' },
  ]);
  assert.deepEqual(await claim(), ['x1', 'y1']);
  await client.gc('gr');
  assert.deepEqual((await groupsStored()).sort(), ['x', 'y'], 'rows whose time is still to come stay');
  await new Promise((resolve) => setTimeout(resolve, 350));
  await client.gc('gr');
  assert.deepEqual(await groupsStored(), [], 'rows whose time has come go');
  assert.deepEqual(await claim(), ['x2'], 'a group with no row may start one');
  await client.enqueue('gr', 4, { id: 'x3', group: 'x' });
  assert.deepEqual(await claim(), [], 'and is charged again');
  assert.deepEqual(await groupsStored(), ['x']);
}
