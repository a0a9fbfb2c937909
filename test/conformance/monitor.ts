/** queueSizeMonitor (Carmine's monitor-fn): a size warning at most once per backoff across every worker. */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { queueSizeMonitor, type Client, type MonitorInfo, type WorkerOptions } from '../../src/index.js';
import { storeTest, type Harness } from '../support/harness.js';
import { gate, quietPeriod, waitFor } from '../support/wait.js';
import type { StoreFixture } from '../support/fixture.js';

// Messages kept back this long stay waiting (and counted) while idle workers poll past them.
const HELD_BACK_MS = 60_000;

/** One turn asked of the store: when it was asked, when it answered, what it said. */
interface Asked {
  readonly worker: string;
  readonly askedAt: number;
  readonly answeredAt: number;
  readonly taken: boolean;
}

/** What a set of workers' monitors did: every call, every turn asked, every warning logged. */
class Watch {
  readonly calls = new Map<string, number>();
  readonly asked: Asked[] = [];
  readonly warnings: { readonly worker: string; readonly message: string }[] = [];

  /** Worker options running `monitor` as the worker `name`, recording around it. */
  options(name: string, monitor: (info: MonitorInfo) => unknown): WorkerOptions {
    return {
      eoqBackoffMs: 20,
      logger: { warn: (message) => this.warnings.push({ worker: name, message }) },
      monitor: (info) => {
        this.calls.set(name, (this.calls.get(name) ?? 0) + 1);
        return monitor({
          ...info,
          takeTurn: async (turn, everyMs) => {
            const askedAt = Date.now();
            const taken = await info.takeTurn(turn, everyMs);
            this.asked.push({ worker: name, askedAt, answeredAt: Date.now(), taken });
            return taken;
          },
        });
      },
    };
  }

  callsOf(name: string): number {
    return this.calls.get(name) ?? 0;
  }
}

async function heldBack(client: Client, queue: string, count: number): Promise<void> {
  await client.enqueueBatch(
    queue,
    Array.from({ length: count }, (_, i) => ({ payload: i, initialBackoffMs: HELD_BACK_MS })),
  );
}

/** Two workers on two clients, each with its own monitor (as two processes would have). */
async function twoWorkers(h: Harness, queue: string, watch: Watch, make: () => (info: MonitorInfo) => unknown) {
  const other = await h.connect();
  h.worker(queue, () => undefined, watch.options('a', make()));
  h.worker(queue, () => undefined, watch.options('b', make()), other);
}

export function monitor(fixture: StoreFixture): void {
  void describe('queueSizeMonitor', () => {
    storeTest(fixture, 'two workers over the size: one warning within the backoff, from one of them', async (h) => {
      const q = h.queue('over');
      await heldBack(h.client, q, 4);
      const watch = new Watch();
      await twoWorkers(h, q, watch, () => queueSizeMonitor(2, HELD_BACK_MS));
      // Each process asks the store once in the window; only one gets the turn.
      await waitFor(() => watch.asked.length >= 2, {
        what: () => `both workers to ask (${JSON.stringify(watch.asked)})`,
      });
      // Both keep polling over the size meanwhile, without asking again (their memo holds).
      const before = { a: watch.callsOf('a'), b: watch.callsOf('b') };
      await waitFor(() => watch.callsOf('a') >= before.a + 3 && watch.callsOf('b') >= before.b + 3, {
        what: 'more polls from both workers',
      });
      assert.deepEqual(watch.asked.map((a) => a.taken).sort(), [false, true]);
      assert.deepEqual(new Set(watch.asked.map((a) => a.worker)), new Set(['a', 'b']));
      assert.equal(watch.warnings.length, 1, JSON.stringify(watch.warnings));
      const [warning] = watch.warnings;
      assert.equal(warning?.worker, watch.asked.find((a) => a.taken)?.worker);
      assert.match(warning?.message ?? '', new RegExp(`queue ${q} holds 4 messages, more than 2`));
    });

    storeTest(fixture, 'after the backoff passes, another warning comes; never two within it', async (h) => {
      const q = h.queue('again');
      await heldBack(h.client, q, 3);
      const watch = new Watch();
      const backoffMs = 300;
      await twoWorkers(h, q, watch, () => queueSizeMonitor(1, backoffMs));
      await waitFor(() => watch.warnings.length >= 3, { timeoutMs: 10_000, what: '3 warnings' });
      const taken = watch.asked.filter((a) => a.taken);
      assert.equal(taken.length, watch.warnings.length);
      // A turn is taken between asking and answering: consecutive turns are a backoff apart at least.
      for (let i = 1; i < taken.length; i++) {
        const gap = (taken[i]?.answeredAt ?? 0) - (taken[i - 1]?.askedAt ?? 0);
        assert.ok(gap >= backoffMs, `turns ${i - 1} and ${i} only ${gap} ms apart`);
      }
    });

    storeTest(fixture, 'under the size (or at it): no warning and no store call', async (h) => {
      const q = h.queue('under');
      await heldBack(h.client, q, 3);
      const watch = new Watch();
      await twoWorkers(h, q, watch, () => queueSizeMonitor(3, 1000));
      await waitFor(() => watch.callsOf('a') >= 5 && watch.callsOf('b') >= 5, { what: '5 polls from each worker' });
      assert.deepEqual(watch.asked, []);
      assert.deepEqual(watch.warnings, []);
    });

    storeTest(fixture, "a monitor's promise: stop() waits for it, and its rejection reaches onError", async (h) => {
      const q = h.queue('async-monitor');
      const release = gate();
      let calls = 0;
      const worker = h.worker(q, () => undefined, {
        monitor: () => {
          calls += 1;
          if (calls > 1) return undefined;
          return release.opened.then(() => {
            throw new Error('monitor failed late');
          });
        },
      });
      await waitFor(() => calls >= 1, { what: 'a poll' });
      let stopped = false;
      const stopping = worker.stop().then(() => (stopped = true));
      await quietPeriod();
      assert.equal(stopped, false, 'stop() resolved while a monitor was still running');
      release.open();
      await stopping;
      assert.deepEqual(h.errors.splice(0).map(String), ['Error: monitor failed late']);
    });

    storeTest(fixture, 'bad arguments are a TypeError that names them', async (h) => {
      const loose = (value: unknown): never => value as never;
      for (const bad of [-1, 1.5, '10', null]) {
        assert.throws(() => queueSizeMonitor(loose(bad)), { name: 'TypeError', message: /maxSize/ });
      }
      for (const bad of [0, -5, 2.5, 'soon']) {
        assert.throws(() => queueSizeMonitor(10, loose(bad)), { name: 'TypeError', message: /warnBackoffMs/ });
      }
      for (const bad of [console.log, {}, 'stderr', null]) {
        assert.throws(() => h.client.worker(h.queue(), () => undefined, { logger: loose(bad) }), {
          name: 'TypeError',
          message: /logger must be an object with a warn\(message\) method/,
        });
      }
      // A bad turn asked of the store from a monitor reaches onError, and the store is not called.
      const q = h.queue('bad-turn');
      const worker = h.worker(q, () => undefined, { monitor: (info) => info.takeTurn('has space', 1000) });
      await waitFor(() => h.errors.length > 0, { what: 'the monitor error' });
      await worker.stop();
      const [error] = h.errors.splice(0);
      assert.ok(error instanceof TypeError && /turn name "has space"/.test(error.message), String(error));
    });
  });
}
