/**
 * The dashboard shows what issue 13 adds: a message's priority and group, and a
 * queue's rate limit and group concurrency when the configuration sets them, and its whole configuration.
 */
import assert from 'node:assert/strict';
import { fetchPage, serveDashboard } from './fixtures/browser.js';
import { tempSqlite } from './fixtures/sqlite-temp.js';
import { storeTest } from './support/harness.js';

const sqlite = tempSqlite('dashboard-scheduling');

/** The text of the Status table's row `label` on a message page. */
function field(body: string, label: string): string | undefined {
  return new RegExp(`<th>${label}</th>\\s*<td>([^<]*)</td>`).exec(body)?.[1];
}

storeTest(sqlite, "a message page shows the message's priority and group", async (h) => {
  const queue = h.queue('jobs');
  await h.client.enqueue(queue, 'a', { id: 'urgent', priority: 3, group: 'tenant-7' });
  await h.client.enqueue(queue, 'b', { id: 'plain' });
  const url = await serveDashboard(h);
  const urgent = await fetchPage(url, `queues/${queue}/messages/urgent`);
  assert.equal(field(urgent, 'Priority'), '3');
  assert.equal(field(urgent, 'Group'), 'tenant-7');
  const plain = await fetchPage(url, `queues/${queue}/messages/plain`);
  assert.equal(field(plain, 'Priority'), '0 (default, runs first)');
  assert.equal(field(plain, 'Group'), '–');
});

storeTest(sqlite, "a message page shows its time to live's deadline when it has one", async (h) => {
  const queue = h.queue('jobs');
  await h.client.enqueue(queue, 'a', { id: 'ttl', expireAfterMs: 3_600_000 });
  await h.client.enqueue(queue, 'b', { id: 'plain' });
  const url = await serveDashboard(h);
  const expireAt = (await h.client.show(queue, 'ttl'))?.policy.expireAt ?? 0;
  const ttl = await fetchPage(url, `queues/${queue}/messages/ttl`);
  const deadline = new Date(expireAt).toISOString().slice(0, 19).replace('T', ' ');
  assert.match(
    ttl,
    new RegExp(`<th>Expires</th>\\s*<td>${deadline} UTC \\(<time datetime="${new Date(expireAt).toISOString()}"`),
  );
  assert.equal(field(await fetchPage(url, `queues/${queue}/messages/plain`), 'Expires'), '–');
});

storeTest(
  sqlite,
  "a queue page shows the queue's rate limit, group concurrency and group rate limit when set",
  async (h) => {
    const queue = h.queue('jobs');
    await h.client.enqueue(queue, 'a');
    const url = await serveDashboard(h);
    const plain = await fetchPage(url, `queues/${queue}`);
    assert.doesNotMatch(plain, /data-rate-limit|data-group-concurrency|data-group-rate-limit/);
    await h.client.configure(queue, {
      rateLimit: { max: 100, perMs: 1000 },
      groupConcurrency: 3,
      groupRateLimit: { max: 2, perMs: 60_000 },
    });
    const limited = await fetchPage(url, `queues/${queue}`);
    assert.match(limited, /data-rate-limit[^>]*>at most 100 per 1 s</);
    assert.match(limited, /data-group-concurrency[^>]*>at most 3 per group</);
    assert.match(limited, /data-group-rate-limit[^>]*>at most 2 per 1 min per group</);
    await h.client.configure(queue, { rateLimit: { max: 5, perMs: 250 }, groupConcurrency: null });
    const changed = await fetchPage(url, `queues/${queue}`);
    assert.match(changed, /data-rate-limit[^>]*>at most 5 per 250 ms</);
    assert.doesNotMatch(changed, /data-group-concurrency/);
  },
);

/** The text of the Configuration panel's cell for `key` on a queue page, tags removed. */
function configCell(body: string, key: string): string | undefined {
  const cell = new RegExp(`<td data-config="${key}">([\\s\\S]*?)</td>`).exec(body)?.[1];
  return cell?.replace(/<[^>]*>/g, '').trim();
}

function assertCells(body: string, expected: Record<string, string>): void {
  for (const [key, text] of Object.entries(expected)) assert.equal(configCell(body, key), text, key);
}

storeTest(sqlite, "a queue page shows the queue's configuration, read only", async (h) => {
  const queue = h.queue('jobs');
  const dlq = h.queue('dead');
  await h.client.enqueue(queue, 'a');
  const url = await serveDashboard(h);
  const defaults = await fetchPage(url, `queues/${queue}`);
  assertCells(defaults, {
    rateLimit: 'none',
    keepDone: 'by age only',
    gcLifetimeMs: '5 min',
    failedLifetimeMs: '7 d',
    deadLetterQueue: 'none',
    events: 'off',
    paused: 'no',
  });

  await h.client.configure(queue, {
    rateLimit: { max: 100, perMs: 1000 },
    groupConcurrency: 3,
    groupRateLimit: { max: 2, perMs: 60_000 },
    keepDone: 1000,
    keepFailed: 50,
    gcLifetimeMs: 3_600_000,
    failedLifetimeMs: 90_000,
    maxDeliveries: 0,
    deadLetterQueue: dlq,
    events: true,
    eventsMaxCount: 500,
    filterEnums: { tier: ['free', 'paid'] },
  });
  const set = await fetchPage(url, `queues/${queue}`);
  assertCells(set, {
    rateLimit: 'at most 100 per 1 s',
    groupConcurrency: 'at most 3 per group',
    groupRateLimit: 'at most 2 per 1 min per group',
    keepDone: 'the newest 1,000',
    keepFailed: 'the newest 50',
    gcLifetimeMs: '1 h',
    failedLifetimeMs: '90 s',
    maxDeliveries: 'never fails for them',
    events: 'on: the newest 500, for 1 d',
    filterEnums: '{&quot;tier&quot;:[&quot;free&quot;,&quot;paid&quot;]}',
  });
  await h.client.configure(queue, { keepDone: 0 });
  assertCells(await fetchPage(url, `queues/${queue}`), { keepDone: 'none', keepFailed: 'the newest 50' });
  // The dead-letter queue links to its own page; nothing on the panel changes anything.
  assert.match(set, new RegExp(`data-config="deadLetterQueue"><a class="mono" href="[^"]*/queues/${dlq}">${dlq}</a>`));
  const panel = /<section class="panel" data-config-panel>[\s\S]*?<\/section>/.exec(set)?.[0] ?? '';
  assert.doesNotMatch(panel, /<form|<input|<button/);
});
