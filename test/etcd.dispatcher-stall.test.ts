/**
 * A dispatcher that is alive (its lease kept) but stuck (its store calls never return, or all fail) resigns
 * after its stall time, another process takes the queue over, and the queue moves; while the queue is idle it
 * stays. Each case runs in its own process and namespace, side by side.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { connect } from '../src/index.js';
import { storeOf } from '../src/client/client-store.js';
import { EtcdStore } from '../src/stores/etcd/store.js';
import { spawnChild } from './support/child.js';
import { waitFor } from './support/wait.js';
import { isolatedUrl } from './fixtures/etcd-support.js';

const STALL_MS = 2000;

const STUCK: Record<string, NodeJS.Signals> = {
  'its store calls never return': 'SIGUSR2',
  'its store calls fail every time': 'SIGUSR1',
};

void describe('a dispatcher stuck while its lease lives', { concurrency: true }, () => {
  for (const [how, signal] of Object.entries(STUCK)) {
    void test(
      `${how}: it resigns, another process takes over, and the queue moves`,
      { timeout: 120_000 },
      async (t) => {
        const url = isolatedUrl(`?dispatcherStallMs=${STALL_MS}`);
        const q = 'wedged';
        const other = spawnChild('etcd-wedged-dispatcher.ts', [url, q]);
        t.after(() => other.kill('SIGKILL'));
        await other.line(/^dispatching wedged$/, 30_000);

        const client = await connect(url, { maintenance: false });
        const handled = new Set<string>();
        const worker = client.worker(q, (job) => void handled.add(job.id), { concurrency: 4 });
        try {
          const store = storeOf(client);
          assert.ok(store instanceof EtcdStore);
          await client.enqueue(q, 'x', { id: 'before' });
          await waitFor(() => handled.has('before'), {
            timeoutMs: 30_000,
            what: 'a message handled by the other process',
          });
          // Idle for more than twice the stall time: nothing waits, so the other process keeps the queue.
          await new Promise((resolve) => setTimeout(resolve, 2 * STALL_MS + 500));
          assert.equal(store.host.dispatching(q), false, 'the idle dispatcher kept the queue');
          assert.doesNotMatch(other.stderr, /made no progress/);

          process.kill(other.pid, signal);
          const ids = Array.from({ length: 20 }, (_, i) => `m${i}`);
          await client.enqueueBatch(
            q,
            ids.map((id) => ({ payload: id, id })),
          );
          await waitFor(() => ids.every((id) => handled.has(id)), {
            timeoutMs: 60_000,
            what: () =>
              `every message handled (${handled.size - 1} of ${ids.length}); the other's log: ${other.stderr}`,
          });
          assert.equal(store.host.dispatching(q), true, 'this process took the queue over');
          assert.match(other.stderr, /dispatcher of .*wedged made no progress: no store call answered/);
        } finally {
          await worker.stop();
          await client.close();
        }
      },
    );
  }
});
