/**
 * TickBatcher: the calls of one tick become one run per key; each caller gets its own slice of the results,
 * all at once from a run that answers the batch, or as soon as its own items are answered from a run that
 * answers each item; with maxItems, a batch goes as soon as it is full, a caller's items never split.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TickBatcher } from '../src/client/tick-batcher.js';

test('calls of one tick are one run per key, each caller given its own results', async () => {
  const runs: string[][] = [];
  const batcher = new TickBatcher<string, string>((key, items) => {
    runs.push([key, ...items]);
    return Promise.resolve(items.map((item) => `${key}:${item}`));
  });
  const [a, b, c] = await Promise.all([batcher.add('q', ['1', '2']), batcher.add('q', ['3']), batcher.add('r', ['4'])]);
  assert.deepEqual(runs, [
    ['q', '1', '2', '3'],
    ['r', '4'],
  ]);
  assert.deepEqual([a, b, c], [['q:1', 'q:2'], ['q:3'], ['r:4']]);
});

test('from a run that answers each item, a caller resumes when its own items are answered', async () => {
  const settle: ((value: string) => void)[] = [];
  let runs = 0;
  const batcher = new TickBatcher<string, string>((_, items) => {
    runs += 1;
    return items.map((item) => new Promise<string>((resolve) => (settle[Number(item)] = resolve)));
  });
  const done: string[] = [];
  const first = batcher.add('q', ['0', '1']).then((r) => done.push(`first ${r.join()}`));
  const second = batcher.add('q', ['2']).then((r) => done.push(`second ${r.join()}`));
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(runs, 1);
  settle[2]?.('c');
  settle[0]?.('a');
  await second;
  assert.deepEqual(done, ['second c']);
  settle[1]?.('b');
  await first;
  assert.deepEqual(done, ['second c', 'first a,b']);
});

test('a run that throws or rejects fails every caller of its batch', async () => {
  const throwing = new TickBatcher<number, number>(() => {
    throw new Error('refused');
  });
  await assert.rejects(Promise.all([throwing.add('q', [1]), throwing.add('q', [2])]), /refused/);
  const rejecting = new TickBatcher<number, number>((_, items) => items.map(() => Promise.reject(new Error('down'))));
  const results = await Promise.allSettled([rejecting.add('q', [1, 2]), rejecting.add('q', [3])]);
  assert.deepEqual(
    results.map((r) => r.status),
    ['rejected', 'rejected'],
  );
});

test('with maxItems, a batch goes once full, the later calls of the tick form the next, a caller never split', async () => {
  const runs: number[][] = [];
  const batcher = new TickBatcher<number, number>((_, items) => {
    runs.push([...items]);
    return Promise.resolve(items.map((item) => item * 10));
  }, 3);
  const calls = [batcher.add('q', [1]), batcher.add('q', [2])];
  assert.deepEqual(runs, []);
  // The third item fills the batch: it runs at once, within this call.
  calls.push(batcher.add('q', [3]));
  assert.deepEqual(runs, [[1, 2, 3]]);
  calls.push(batcher.add('q', [4]), batcher.add('q', [5, 6, 7, 8]), batcher.add('q', [9]));
  assert.deepEqual(runs, [
    [1, 2, 3],
    [4, 5, 6, 7, 8],
  ]);
  assert.deepEqual(await Promise.all(calls), [[10], [20], [30], [40], [50, 60, 70, 80], [90]]);
  // The rest of the tick's calls went at its end.
  assert.deepEqual(runs, [[1, 2, 3], [4, 5, 6, 7, 8], [9]]);
});

test('with maxItems, a run that fails rejects the callers of its own batch only', async () => {
  const batcher = new TickBatcher<number, number>((_, items) => {
    if (items.includes(4)) return Promise.reject(new Error('down'));
    return Promise.resolve(items);
  }, 2);
  const results = await Promise.allSettled([1, 2, 3, 4, 5].map((i) => batcher.add('q', [i])));
  assert.deepEqual(
    results.map((r) => r.status),
    ['fulfilled', 'fulfilled', 'rejected', 'rejected', 'fulfilled'],
  );
});
