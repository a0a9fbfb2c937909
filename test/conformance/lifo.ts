/** LIFO messages: taken newest first within their priority, before that priority's FIFO messages. */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { storeTest } from '../support/harness.js';
import { handledOrder } from './priority.js';
import type { StoreFixture } from '../support/fixture.js';

export function lifo(fixture: StoreFixture): void {
  void describe('lifo', () => {
    storeTest(fixture, 'a LIFO message runs before its priority’s FIFO ones, the newest LIFO first', async (h) => {
      const q = h.queue('lifo-order');
      await h.client.enqueue(q, 'x', { id: 'fifo-a' });
      await h.client.enqueue(q, 'x', { id: 'lifo-a', lifo: true });
      await h.client.enqueue(q, 'x', { id: 'fifo-b' });
      await h.client.enqueue(q, 'x', { id: 'lifo-b', lifo: true });
      await h.client.enqueue(q, 'x', { id: 'lifo-c', lifo: true });
      assert.deepEqual(await handledOrder(h, q, 5), ['lifo-c', 'lifo-b', 'lifo-a', 'fifo-a', 'fifo-b']);
    });

    storeTest(fixture, 'LIFO stays within its priority; a batch’s LIFO items run newest first', async (h) => {
      const q = h.queue('lifo-priorities');
      await h.client.enqueue(q, 'x', { id: 'p3-fifo', priority: 3 });
      await h.client.enqueueBatch(q, [
        { payload: 1, id: 'p3-lifo-a', priority: 3, lifo: true },
        { payload: 2, id: 'p5-lifo', priority: 5, lifo: true },
        { payload: 3, id: 'p3-lifo-b', priority: 3, lifo: true },
      ]);
      await h.client.enqueue(q, 'x', { id: 'p1-fifo', priority: 1 });
      await h.client.enqueue(q, 'x', { id: 'p5-fifo', priority: 5 });
      await h.client.enqueue(q, 'x', { id: 'p1-lifo', priority: 1, lifo: true });
      const expected = 'p1-lifo p1-fifo p3-lifo-b p3-lifo-a p3-fifo p5-lifo p5-fifo';
      assert.deepEqual(await handledOrder(h, q, 7), expected.split(' '));
    });

    storeTest(fixture, 'lifo with a delay is a TypeError, and nothing is written', async (h) => {
      const q = h.queue('lifo-bad');
      for (const options of [
        { initialBackoffMs: 10 },
        { runAt: Date.now() + 60_000 },
        { debounce: { id: 'd', ms: 10 } },
      ]) {
        await assert.rejects(
          h.client.enqueue(q, 'x', { id: 'bad', lifo: true, ...options }),
          (error: unknown) => error instanceof TypeError && /lifo/.test(error.message),
        );
      }
      await assert.rejects(
        h.client.enqueue(q, 'x', { id: 'bad', lifo: 'yes' as never }),
        (error: unknown) => error instanceof TypeError && /lifo/.test(error.message),
      );
      assert.equal(await h.client.status(q, 'bad'), null);
    });
  });
}
