/**
 * The dashboard shows what issue 13 adds: a message's priority and group, and a
 * queue's rate limit and group concurrency when the configuration sets them.
 */
import assert from 'node:assert/strict';
import { serveDashboard } from './fixtures/browser.js';
import { tempSqlite } from './fixtures/sqlite-temp.js';
import { storeTest } from './support/harness.js';

const sqlite = tempSqlite('dashboard-scheduling');

async function page(base: string, path: string): Promise<string> {
  const answer = await fetch(new URL(path, base));
  assert.equal(answer.status, 200, path);
  return answer.text();
}

/** The text of the Status table's row `label` on a message page. */
function field(body: string, label: string): string | undefined {
  return new RegExp(`<th>${label}</th>\\s*<td>([^<]*)</td>`).exec(body)?.[1];
}

storeTest(sqlite, "a message page shows the message's priority and group", async (h) => {
  const queue = h.queue('jobs');
  await h.client.enqueue(queue, 'a', { id: 'urgent', priority: 3, group: 'tenant-7' });
  await h.client.enqueue(queue, 'b', { id: 'plain' });
  const url = await serveDashboard(h);
  const urgent = await page(url, `queues/${queue}/messages/urgent`);
  assert.equal(field(urgent, 'Priority'), '3');
  assert.equal(field(urgent, 'Group'), 'tenant-7');
  const plain = await page(url, `queues/${queue}/messages/plain`);
  assert.equal(field(plain, 'Priority'), '0 (default, runs first)');
  assert.equal(field(plain, 'Group'), '–');
});

storeTest(sqlite, "a queue page shows the queue's rate limit and group concurrency when set", async (h) => {
  const queue = h.queue('jobs');
  await h.client.enqueue(queue, 'a');
  const url = await serveDashboard(h);
  const plain = await page(url, `queues/${queue}`);
  assert.doesNotMatch(plain, /data-rate-limit|data-group-concurrency/);
  await h.client.configure(queue, { rateLimit: { max: 100, perMs: 1000 }, groupConcurrency: 3 });
  const limited = await page(url, `queues/${queue}`);
  assert.match(limited, /data-rate-limit[^>]*>at most 100 per 1 s</);
  assert.match(limited, /data-group-concurrency[^>]*>at most 3 per group</);
  await h.client.configure(queue, { rateLimit: { max: 5, perMs: 250 }, groupConcurrency: null });
  const changed = await page(url, `queues/${queue}`);
  assert.match(changed, /data-rate-limit[^>]*>at most 5 per 250 ms</);
  assert.doesNotMatch(changed, /data-group-concurrency/);
});
