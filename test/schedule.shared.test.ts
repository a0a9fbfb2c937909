/**
 * SharedSchedulers on a real SQLite store: one loop per queue however many workers join, errors to the
 * longest-joined member still there, and the loop's end awaited by the last member to leave.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { connect, type Client } from '../src/index.js';
import { storeOf } from '../src/client/client-store.js';
import { SharedSchedulers } from '../src/schedule/shared.js';
import type { Store } from '../src/stores/contract/contract.js';
import { waitFor } from './support/wait.js';

const dir = mkdtempSync(join(tmpdir(), 'kvmq-shared-schedulers-'));
const clients: Client[] = [];
// Errors no test expected; checked at the end of each test that joins with `unexpected`.
const errors: unknown[] = [];
const unexpected = (error: unknown): void => void errors.push(error);
after(async () => {
  await Promise.all(clients.map((client) => client.close()));
  rmSync(dir, { recursive: true, force: true });
});

/** The real store, its schedule reads counted and, while `failing` is set, refused. */
async function countingStore(): Promise<{ store: Store; reads: Map<string, number>; failing: { on: boolean } }> {
  const client = await connect(`sqlite:${join(dir, `${clients.length}.db`)}`, { maintenance: false });
  clients.push(client);
  const real = storeOf(client);
  const reads = new Map<string, number>();
  const failing = { on: false };
  const store: Store = Object.create(real) as Store;
  store.schedules = (queue) => {
    reads.set(queue, (reads.get(queue) ?? 0) + 1);
    return failing.on ? Promise.reject(new Error(`schedules of ${queue} refused`)) : real.schedules(queue);
  };
  return { store, reads, failing };
}

void test('members of one queue share one loop; each queue has its own; the last to leave ends it', async () => {
  const { store, reads } = await countingStore();
  const shared = new SharedSchedulers(store);
  const [a1, a2, b1] = [new AbortController(), new AbortController(), new AbortController()];
  const a1Left = shared.join('a', unexpected, a1.signal);
  const a2Left = shared.join('a', unexpected, a2.signal);
  const b1Left = shared.join('b', unexpected, b1.signal);
  await waitFor(() => reads.get('a') === 1 && reads.get('b') === 1, { what: 'the first read of each queue' });
  assert.deepEqual(shared.queues.sort(), ['a', 'b']);
  shared.wake('a');
  await waitFor(() => reads.get('a') === 2, { what: 'the woken read' });
  assert.equal(reads.get('b'), 1, 'waking a leaves b asleep');

  a1.abort();
  await a1Left;
  assert.deepEqual(shared.queues.sort(), ['a', 'b'], 'a still has a member');
  a2.abort();
  b1.abort();
  await Promise.all([a2Left, b1Left]);
  assert.deepEqual(shared.queues, []);
  const before = reads.get('a');
  shared.wake('a');
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.equal(reads.get('a'), before, 'no loop reads once every member left');
  assert.deepEqual(errors, []);
});

void test("a loop's errors go to the longest-joined member still there", async () => {
  const { store, failing } = await countingStore();
  failing.on = true;
  const shared = new SharedSchedulers(store);
  const [first, second] = [new AbortController(), new AbortController()];
  const heardFirst: string[] = [];
  const heardSecond: string[] = [];
  const firstLeft = shared.join('q', (error) => heardFirst.push(String(error)), first.signal);
  const secondLeft = shared.join('q', (error) => heardSecond.push(String(error)), second.signal);
  await waitFor(() => heardFirst.length > 0, { what: 'the first error' });
  assert.deepEqual(heardSecond, [], 'the second member hears nothing while the first is there');
  first.abort();
  await firstLeft;
  shared.wake('q');
  await waitFor(() => heardSecond.length > 0, { what: 'an error for the second member' });
  assert.match(heardSecond.join('\n'), /schedules of q refused/);
  second.abort();
  await secondLeft;
});

void test('a member whose signal is already aborted joins nothing', async () => {
  const { store, reads } = await countingStore();
  const shared = new SharedSchedulers(store);
  await shared.join('q', unexpected, AbortSignal.abort());
  assert.deepEqual(shared.queues, []);
  assert.equal(reads.get('q'), undefined);
  assert.deepEqual(errors, []);
});
