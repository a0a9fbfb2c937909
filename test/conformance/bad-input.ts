/** Bad calls fail at once, with the right error and a message that says how to fix them; nothing is written. */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { ClosedError, KvmqError, PayloadTooLargeError, StoreUrlError, connect } from '../../src/index.js';
import { storeTest } from '../support/harness.js';
import type { StoreFixture } from '../support/fixture.js';
import { storeOf } from '../../src/client/client-store.js';

// Payloads above this are not built just to test the limit.
const LARGEST_TESTED_LIMIT = 64 * 1024 * 1024;

/** A value as a caller without types might pass it. */
const loose = (value: unknown): never => value as never;

const BAD_WORKER_OPTIONS: [unknown, RegExp][] = [
  [{ concurrency: 0 }, /concurrency/],
  [{ concurrency: 1.5 }, /concurrency/],
  [{ lockMs: 10 }, /lockMs/],
  [{ lockMs: '1000' }, /lockMs/],
  [{ throttleMs: -1 }, /throttleMs/],
  [{ eoqBackoffMs: -5 }, /eoqBackoffMs/],
  [{ eoqBackoffMs: 'soon' }, /eoqBackoffMs/],
  [{ maxAttempts: 0 }, /maxAttempts/],
  [{ retryBackoffMs: [] }, /retryBackoffMs/],
  [{ timeoutMs: 0 }, /timeoutMs/],
  [{ timeoutMs: 1.5 }, /timeoutMs/],
  [{ timeoutMs: '1000' }, /timeoutMs/],
  [{ timeoutMs: 2 ** 31 }, /timeoutMs/],
  [{ monitor: 'log' }, /monitor/],
  [{ onError: 1 }, /onError/],
  [{ autoStart: 'yes' }, /autoStart/],
  [{ stopGraceMs: -1 }, /stopGraceMs/],
  [{ stopGraceMs: 2 ** 31 }, /stopGraceMs/],
  [{ respectFilters: 1 }, /respectFilters/],
  [{ filters: 'standard' }, /filters/],
  [{ filters: { performance_class: { value: 'low', method: 'most' } } }, /method/],
  [{ filters: { 'bad name': 'x' } }, /filter name/],
  [{ concurency: 2 }, /unknown option 'concurency'/],
  [null, /worker options/],
];

const BAD_ENQUEUE_OPTIONS: [unknown, RegExp][] = [
  [{ delayMs: 5 }, /unknown option 'delayMs'/],
  [{ initialBackoffMs: -1 }, /initialBackoffMs/],
  [{ initialBackoffMs: 1.5 }, /initialBackoffMs/],
  [{ id: 'has space' }, /message id/],
  [{ id: '' }, /message id/],
  [{ id: 'x'.repeat(300) }, /message id/],
  [{ id: 42 }, /message id/],
  [{ allowRequeue: 'yes' }, /allowRequeue/],
  [{ replacePayload: 1 }, /replacePayload/],
  [{ metadata: ['a'] }, /metadata/],
  [{ filters: 'standard' }, /filters/],
  [null, /options/],
];

export function badInput(fixture: StoreFixture): void {
  void describe('bad input', () => {
    storeTest(fixture, 'invalid worker options throw a TypeError at once, and nothing starts', async (h) => {
      const q = h.queue('bad-worker');
      // Straight on the client: the harness's defaults would mask some of these.
      for (const [options, message] of BAD_WORKER_OPTIONS) {
        assert.throws(
          () => h.client.worker(q, () => undefined, loose(options)),
          (error: unknown) => error instanceof TypeError && message.test(error.message),
          JSON.stringify(options),
        );
      }
      assert.throws(
        () => h.client.worker(q, loose('not a function')),
        (e: unknown) => e instanceof TypeError && /handler/.test(e.message),
      );
      assert.throws(
        () => h.client.worker('bad queue!', () => undefined),
        (e: unknown) => e instanceof TypeError && /queue name/.test(e.message),
      );
      assert.deepEqual((await h.client.queueStatus(q)).consumers, []);
    });

    storeTest(
      fixture,
      'invalid enqueue options and payloads are refused with a TypeError, nothing written',
      async (h) => {
        const q = h.queue('bad-enqueue');
        await h.client.configure(q, { filterEnums: { performance_class: ['low', 'high'] } });
        for (const [options, message] of BAD_ENQUEUE_OPTIONS) {
          await assert.rejects(
            h.client.enqueue(q, 'x', loose(options)),
            (error: unknown) => error instanceof TypeError && message.test(error.message),
            JSON.stringify(options),
          );
        }
        await assert.rejects(
          h.client.enqueue(q, undefined),
          (e: unknown) => e instanceof TypeError && /payload/.test(e.message),
        );
        await assert.rejects(
          h.client.enqueue(q, () => 1),
          (e: unknown) => e instanceof TypeError && /payload/.test(e.message),
        );
        await assert.rejects(
          h.client.enqueue('', 'x'),
          (e: unknown) => e instanceof TypeError && /queue name/.test(e.message),
        );
        await assert.rejects(h.client.enqueueBatch(q, loose({ payload: 1 })), TypeError);
        // One bad item refuses the whole batch.
        await assert.rejects(
          h.client.enqueueBatch(q, [{ payload: 1, id: 'fine' }, loose({ payload: 2, id: 'fine2', urgency: 1 })]),
          /unknown option 'urgency'/,
        );
        assert.equal(await h.client.status(q, 'fine'), null);
        assert.equal((await h.client.queueStatus(q)).total, 0);
      },
    );

    storeTest(
      fixture,
      'a payload over maxPayloadBytes is refused with PayloadTooLargeError, nothing written',
      async (h, t) => {
        const q = h.queue('too-large');
        const limit = storeOf(h.client).capabilities.maxPayloadBytes;
        assert.ok(Number.isInteger(limit) && limit > 0, `maxPayloadBytes is ${limit}`);
        if (limit > LARGEST_TESTED_LIMIT) {
          t.skip(`maxPayloadBytes ${limit} is too large to test here`);
          return;
        }
        await assert.rejects(h.client.enqueue(q, Buffer.alloc(limit + 1), { id: 'big' }), (error: unknown) => {
          assert.ok(error instanceof PayloadTooLargeError && error instanceof KvmqError);
          assert.equal(error.code, 'PAYLOAD_TOO_LARGE');
          assert.equal(error.part, 'payload');
          assert.equal(error.bytes, limit + 1);
          assert.equal(error.limit, limit);
          assert.match(error.message, new RegExp(String(limit)));
          return true;
        });
        // JSON counts in its encoded bytes: the quotes tip this string over.
        await assert.rejects(h.client.enqueue(q, 'x'.repeat(limit - 1), { id: 'big-json' }), PayloadTooLargeError);
        await assert.rejects(
          h.client.enqueueBatch(q, [
            { payload: 'small', id: 'small' },
            { payload: Buffer.alloc(limit + 1), id: 'big2' },
          ]),
          PayloadTooLargeError,
        );
        for (const id of ['big', 'big-json', 'small', 'big2']) assert.equal(await h.client.status(q, id), null, id);

        // Exactly the limit is fine.
        assert.deepEqual(await h.client.enqueue(q, Buffer.alloc(limit, 7), { id: 'max' }), {
          ok: true,
          id: 'max',
          action: 'added',
        });
      },
    );

    storeTest(fixture, 'an unknown store URL is refused with StoreUrlError listing the accepted forms', async (h) => {
      for (const url of ['mysql://localhost/db', 'kvmq.db', '']) {
        await assert.rejects(connect(url), (error: unknown) => {
          assert.ok(error instanceof StoreUrlError, `${url}: ${String(error)}`);
          assert.equal(error.code, 'STORE_URL');
          assert.match(error.message, /accepted forms/);
          assert.match(error.message, /sqlite:/);
          return true;
        });
      }
      // An option the store does not know is a typo, not something to ignore.
      const withOption = `${h.url}${h.url.includes('?') ? '&' : '?'}noSuchOption=1`;
      await assert.rejects(
        connect(withOption),
        (error: unknown) => error instanceof StoreUrlError && /noSuchOption/.test(error.message),
      );
      await assert.rejects(connect(h.url, loose({ maintainance: false })), /unknown option 'maintainance'/);
    });

    storeTest(fixture, 'invalid configuration is refused with a TypeError and changes nothing', async (h) => {
      const q = h.queue('bad-config');
      const before = await h.client.configure(q, { gcLifetimeMs: 5000 });
      const bad: [unknown, RegExp][] = [
        [{ gcIntervalMs: 0 }, /gcIntervalMs/],
        [{ gcLifetimeMs: -1 }, /gcLifetimeMs/],
        [{ filterEnums: { size: ['s', 's'] } }, /twice/],
        [{ filterEnums: { size: 's' } }, /filterEnums\.size/],
        [{ gcLifeTimeMs: 1 }, /unknown option 'gcLifeTimeMs'/],
      ];
      for (const [patch, message] of bad) {
        await assert.rejects(
          h.client.configure(q, loose(patch)),
          (e: unknown) => e instanceof TypeError && message.test(e.message),
        );
      }
      assert.deepEqual(await h.client.config(q), before);
    });

    storeTest(fixture, 'a closed client refuses every call with ClosedError', async (h) => {
      const q = h.queue('closed');
      const client = await h.connect();
      await client.close();
      await client.close(); // closing twice is fine
      await assert.rejects(client.enqueue(q, 'x'), ClosedError);
      await assert.rejects(client.status(q, 'm'), ClosedError);
      await assert.rejects(client.queueStatus(q), ClosedError);
      assert.throws(() => client.worker(q, () => undefined), ClosedError);
    });
  });
}
