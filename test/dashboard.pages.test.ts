/** What the dashboard's pages say, over HTTP: every count with a noun agreeing with it. */
import assert from 'node:assert/strict';
import { serveDashboard } from './fixtures/browser.js';
import { tempSqlite } from './fixtures/sqlite-temp.js';
import { storeTest } from './support/harness.js';
import { waitFor } from './support/wait.js';

const sqlite = tempSqlite('dashboard-pages');

async function page(base: string, path: string): Promise<string> {
  const answer = await fetch(new URL(path, base));
  assert.equal(answer.status, 200, path);
  return answer.text();
}

storeTest(sqlite, 'every count with a noun agrees with it: 1 message, 2 messages, 1 consumer', async (h) => {
  const base = await serveDashboard(h);
  const queue = h.queue('counts');
  await h.client.enqueue(queue, 'only', { id: 'only' });
  await h.client.configure(queue, { paused: true });
  h.worker(queue, () => undefined);
  await waitFor(async () => (await h.client.queueStatus(queue)).consumers.length === 1, { what: 'consumer' });
  const singular = /1 message<[\s\S]*1 consumer</;
  assert.match(await page(base, ''), singular);
  assert.match(await page(base, `queues/${queue}`), />1 message</);
  assert.match(await page(base, `queues/${queue}/clear`), /Remove 1 message\s*</);
  assert.match(await page(base, `queues/${queue}?done=retried-failed&n=1`), /Queued 1 failed message again\./);
  await h.client.enqueue(queue, 'another');
  assert.match(await page(base, ''), />2 messages</);
  assert.match(await page(base, `queues/${queue}/clear`), /Remove 2 messages\s*</);
  assert.match(await page(base, `queues/${queue}?done=retried-failed&n=0`), /Queued 0 failed messages again\./);
  // The live updates rewrite number and noun together, from the nouns the page gives.
  assert.match(await page(base, ''), /data-total="[^"]+" data-one="message" data-many="messages"/);
});
