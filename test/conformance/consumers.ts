/** The consumer registry (zkmq's consumers/<id>/current): who is alive and what each holds. */
import assert from 'node:assert/strict';
import { hostname } from 'node:os';
import { describe } from 'node:test';
import { storeTest } from '../support/harness.js';
import { JobLog } from '../support/jobs.js';
import { gate, waitFor } from '../support/wait.js';
import type { Client, ConsumerInfo } from '../../src/index.js';
import type { StoreFixture } from '../support/fixture.js';

async function consumer(client: Client, queue: string, id: string): Promise<ConsumerInfo | undefined> {
  return (await client.queueStatus(queue)).consumers.find((c) => c.id === id);
}

export function consumers(fixture: StoreFixture): void {
  void describe('consumers', () => {
    storeTest(fixture, 'a running worker is listed with the ids it holds; after stop() it is gone', async (h) => {
      const q = h.queue('registry');
      const release = gate();
      const log = new JobLog();
      const busy = h.worker(q, async (job) => {
        log.record(job);
        await release.opened;
      });
      await h.client.enqueue(q, 'x', { id: 'm' });
      await log.handled('m');
      // Started once `busy` holds m: started before, it could be the one handed m, which `log` never sees.
      const idle = h.worker(q, () => undefined);

      const holder = await waitFor(async () => {
        const c = await consumer(h.client, q, busy.id);
        return c?.holding.includes('m') === true && c;
      });
      assert.deepEqual(holder.holding, ['m']);
      assert.equal(holder.pid, process.pid);
      assert.equal(holder.host, hostname());
      assert.ok(holder.startedAt <= holder.lastSeenAt && holder.lastSeenAt <= Date.now() + 1000);
      const other = await waitFor(() => consumer(h.client, q, idle.id));
      assert.deepEqual(other.holding, []);

      release.open();
      await waitFor(async () => (await consumer(h.client, q, busy.id))?.holding.length === 0, {
        what: 'the finished message to leave holding',
      });
      await busy.stop();
      const ids = (await h.client.queueStatus(q)).consumers.map((c) => c.id);
      assert.deepEqual(ids, [idle.id]);
      await idle.stop();
      assert.deepEqual((await h.client.queueStatus(q)).consumers, []);
    });

    storeTest(fixture, 'client.close() stops its workers and unregisters them', async (h) => {
      const q = h.queue('close');
      const other = await h.connect();
      const worker = h.worker(q, () => undefined, {}, other);
      await waitFor(() => consumer(h.client, q, worker.id), { what: 'the worker to register' });
      await other.close();
      assert.equal(worker.running, false);
      assert.deepEqual((await h.client.queueStatus(q)).consumers, []);
    });
  });
}
