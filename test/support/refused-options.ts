/** Enqueue options a store must refuse whole: a TypeError, and nothing written. */
import assert from 'node:assert/strict';
import type { Harness } from './harness.js';

/**
 * enqueue() with `options` (on message id bad) is a TypeError that `check` accepts, and a batch of a good message
 * and a bad one with them is refused with a TypeError too.
 */
export async function assertOptionsRefused(
  h: Harness,
  q: string,
  options: object,
  check: (error: TypeError) => boolean,
): Promise<void> {
  await assert.rejects(
    h.client.enqueue(q, 'x', { id: 'bad', ...options }),
    (error: unknown) => error instanceof TypeError && check(error),
    JSON.stringify(options),
  );
  await assert.rejects(
    h.client.enqueueBatch(q, [
      { payload: 1, id: 'good' },
      { payload: 2, id: 'bad', ...options },
    ]),
    TypeError,
  );
}

/** After refused enqueues: neither the good message nor the bad one is stored, and the queue is empty. */
export async function assertNothingWritten(h: Harness, q: string): Promise<void> {
  for (const id of ['bad', 'good']) assert.equal(await h.client.status(q, id), null, id);
  assert.equal((await h.client.queueStatus(q)).total, 0);
}
