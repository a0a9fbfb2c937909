/**
 * The dashboard in a real browser (Debian's chromium, headless, through puppeteer-core) over a real store
 * holding messages in every state: SQLite always, Redis when the run started one (KVMQ_TEST_REDIS_URL).
 * With KVMQ_SCREENSHOTS=1 it also writes docs/dashboard-*.png at 1280×800.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { after, before, describe } from 'node:test';
import type { Browser, Page } from 'puppeteer-core';
import { MESSAGE_STATES, type Client } from '../src/index.js';
import { inPage, launchBrowser, openPage, serveDashboard, shownCounts, submit, visit } from './fixtures/browser.js';
import { FAILURE, seedEveryState, seedScreenshotQueues } from './fixtures/dashboard-seed.js';
import { deletePrefixes } from './fixtures/redis-server.js';
import { tempSqlite } from './fixtures/sqlite-temp.js';
import { storeOf } from '../src/client/client-store.js';
import type { StoreFixture } from './support/fixture.js';
import { storeTest, type Harness } from './support/harness.js';
import { quietPeriod, waitFor } from './support/wait.js';

const TIMEOUT_MS = 90_000;
let browser: Browser;

before(async () => {
  browser = await launchBrowser();
});
after(async () => {
  await browser.close();
});

/** Listing queues and reading events come per store (issue 12); a store without them yet skips what needs them. */
async function listsQueues(client: Client): Promise<boolean> {
  try {
    await client.queues();
    return true;
  } catch {
    return false;
  }
}

/** The dashboard over h's client, served and opened in a new tab at `path` (relative to its root). */
async function dashboardAt(h: Harness, path: string): Promise<Page> {
  const url = await serveDashboard(h);
  const page = await openPage(h, browser);
  await visit(page, `${url}${path}`);
  return page;
}

function browserSuite(fixture: StoreFixture): void {
  void describe(`dashboard in chromium on ${fixture.name}`, () => {
    storeTest(
      fixture,
      'the counts shown match queueStatus, and follow the queue live',
      async (h) => {
        const queue = h.queue('orders');
        await seedEveryState(h, queue);
        const page = await dashboardAt(h, `queues/${queue}`);
        const status = await h.client.queueStatus(queue);
        const flows = storeOf(h.client).capabilities.flows;
        for (const state of MESSAGE_STATES) {
          if (state !== 'waiting-children' || flows) assert.ok(status.counts[state] > 0, `seeded ${state}`);
        }
        assert.deepEqual(await shownCounts(page, queue), status.counts);
        // A message enqueued now shows up without a reload (server-sent events).
        await h.client.enqueue(queue, { late: true }, { id: 'order-late' });
        const queued = status.counts.queued + 1;
        await waitFor(async () => (await shownCounts(page, queue)).queued === queued, { what: 'live count' });
      },
      { timeoutMs: TIMEOUT_MS },
    );

    storeTest(
      fixture,
      'a live count keeps its noun agreeing: 2 messages become 1 message, 0 consumers 1 consumer',
      async (h) => {
        const queue = h.queue('nouns');
        await h.client.enqueueBatch(queue, [{ id: 'first', payload: 1 }, { payload: 2 }]);
        await h.client.configure(queue, { paused: true });
        const page = await dashboardAt(h, '');
        const card = `document.querySelector('a[href$="/queues/${queue}"]').closest('.card').innerText`;
        assert.match(await inPage<string>(page, card), /2 messages · 0 consumers,/);
        await h.client.remove(queue, 'first');
        h.worker(queue, () => undefined);
        // Both change without a reload (server-sent events), number and noun together.
        await waitFor(async () => /\b1 message · 1 consumer,/.test(await inPage<string>(page, card)), {
          what: 'live counts with their nouns',
        });
      },
      { timeoutMs: TIMEOUT_MS },
    );

    storeTest(
      fixture,
      'the front page lists every queue with counts that match; charts draw the last hour from events',
      async (h, t) => {
        if (!(await listsQueues(h.client))) {
          t.skip(`${fixture.name} does not list queues or read events on this branch yet`);
          return;
        }
        const orders = h.queue('orders');
        const mail = h.queue('mail');
        await h.client.configure(mail, { events: true });
        await h.client.enqueueBatch(mail, [
          { id: 'ok-1', payload: 1 },
          { id: 'ok-2', payload: 2 },
          { id: 'ok-3', payload: 3 },
          { id: 'bad-1', payload: 4, attempts: 1 },
        ]);
        const worker = h.worker(mail, (job) => {
          if (job.id.startsWith('bad')) throw new Error('smtp 550');
        });
        await waitFor(async () => (await h.client.queueStatus(mail)).counts.queued === 0);
        await worker.stop();
        await seedEveryState(h, orders);
        const page = await dashboardAt(h, '');
        for (const queue of [orders, mail]) {
          assert.deepEqual(await shownCounts(page, queue), (await h.client.queueStatus(queue)).counts, queue);
        }
        // Events are off for orders: its chart area offers to turn them on.
        const offer = `form[action$="/queues/${orders}/events"] button`;
        assert.ok((await page.$(offer)) !== null, 'an action to turn events on');
        await page.waitForSelector('.chart-summary');
        const summary = await inPage<string>(page, 'document.querySelector(".chart-summary").textContent');
        assert.match(summary, /^3 completed · 1 failed · failure rate 25\.0%/);
        assert.ok((await page.$('.chart canvas')) !== null, 'uPlot drew the chart');
        await submit(page, offer);
        assert.equal((await h.client.config(orders)).events, true);
      },
      { timeoutMs: TIMEOUT_MS },
    );

    storeTest(
      fixture,
      'a failed message shows its error; pressing retry gets it handled by a running worker',
      async (h) => {
        const queue = h.queue('orders');
        await seedEveryState(h, queue);
        const page = await dashboardAt(h, `queues/${queue}?state=failed`);
        await submit(page, 'a[href$="/messages/order-1042"]');
        const text = await inPage<string>(page, 'document.body.innerText');
        assert.match(text, /Last error/);
        assert.ok(text.includes(FAILURE), 'the error is shown');
        const handled: string[] = [];
        h.worker(queue, (job) => {
          handled.push(job.id);
        });
        await submit(page, 'form[action$="/order-1042/retry"] button');
        assert.match(await inPage<string>(page, 'document.body.innerText'), /Queued again/);
        await waitFor(() => handled.includes('order-1042'), { what: 'the retried message handled' });
        await waitFor(async () => (await h.client.status(queue, 'order-1042'))?.state === 'done-awaiting-gc');
      },
      { timeoutMs: TIMEOUT_MS },
    );

    storeTest(
      fixture,
      "pause stops a running worker's claims and resume restarts them",
      async (h) => {
        const queue = h.queue('jobs');
        const handled: string[] = [];
        h.worker(queue, (job) => {
          handled.push(job.id);
        });
        await h.client.enqueue(queue, 'first', { id: 'first' });
        await waitFor(() => handled.includes('first'));
        const page = await dashboardAt(h, `queues/${queue}`);
        await submit(page, 'form[action$="/pause"] button');
        assert.equal((await h.client.queueStatus(queue)).paused, true);
        assert.match(await inPage<string>(page, 'document.body.innerText'), /Paused: workers claim nothing/);
        // The configuration panel says so too, as the store now holds it.
        const paused = `document.querySelector('[data-config="paused"]').innerText`;
        assert.equal(await inPage<string>(page, paused), 'yes: workers claim nothing');
        await h.client.enqueue(queue, 'second', { id: 'second' });
        await waitFor(async () => (await shownCounts(page, queue)).queued === 1, { what: 'the queued count, live' });
        await quietPeriod(500);
        assert.deepEqual(handled, ['first'], 'nothing claimed while paused');
        await submit(page, 'form[action$="/resume"] button');
        await waitFor(() => handled.includes('second'), { what: 'claims after resume' });
      },
      { timeoutMs: TIMEOUT_MS },
    );

    storeTest(
      fixture,
      'clearing asks for confirmation first; read-only hides and refuses actions',
      async (h) => {
        const queue = h.queue('jobs');
        await h.client.enqueueBatch(queue, [{ payload: 1 }, { payload: 2 }]);
        const page = await dashboardAt(h, `queues/${queue}`);
        await submit(page, 'a[href$="/clear"]');
        assert.match(await inPage<string>(page, 'document.body.innerText'), /Remove 2 messages/);
        assert.equal((await h.client.queueStatus(queue)).total, 2, 'nothing removed before confirming');
        await submit(page, 'form[action$="/clear"] button');
        assert.equal((await h.client.queueStatus(queue)).total, 0);

        await h.client.enqueue(queue, 3, { id: 'kept' });
        const readOnly = await serveDashboard(h, { readOnly: true });
        await visit(page, `${readOnly}queues/${queue}`);
        assert.equal(await inPage<number>(page, 'document.querySelectorAll("form[method=post]").length'), 0);
        await visit(page, `${readOnly}queues/${queue}/messages/kept`);
        assert.equal(await inPage<number>(page, 'document.querySelectorAll("form[method=post]").length'), 0);
      },
      { timeoutMs: TIMEOUT_MS },
    );

    storeTest(
      fixture,
      'a request without the token or the CSRF token is refused',
      async (h) => {
        const queue = h.queue('jobs');
        await h.client.enqueue(queue, 1);
        const token = randomBytes(24).toString('base64url');
        const url = await serveDashboard(h, { token });
        const page = await openPage(h, browser);
        const refused = await visit(page, `${url}queues/${queue}`);
        assert.equal(refused.status(), 401);
        assert.match(await inPage<string>(page, 'document.body.innerText'), /needs its token/);
        const wrong = await visit(page, `${url}?token=${'x'.repeat(32)}`);
        assert.equal(wrong.status(), 401);
        // The right token once: kept as a cookie, and the address is cleaned of it.
        const opened = await visit(page, `${url}queues/${queue}?token=${token}`);
        assert.equal(opened.status(), 200);
        assert.equal(page.url(), `${url}queues/${queue}`);
        assert.equal((await visit(page, `${url}queues/${queue}`)).status(), 200);
        // A form whose CSRF token is taken away, or altered, is refused and changes nothing.
        await inPage(page, 'document.querySelector("form[action$=\\"/pause\\"] input[name=_csrf]").remove()');
        assert.equal((await submit(page, 'form[action$="/pause"] button'))?.status(), 403);
        await visit(page, `${url}queues/${queue}`);
        await inPage(page, 'document.querySelector("form[action$=\\"/pause\\"] input[name=_csrf]").value = "AAAA"');
        assert.equal((await submit(page, 'form[action$="/pause"] button'))?.status(), 403);
        assert.equal((await h.client.queueStatus(queue)).paused, false);
        await visit(page, `${url}queues/${queue}`);
        assert.equal((await submit(page, 'form[action$="/pause"] button'))?.status(), 200);
        assert.equal((await h.client.queueStatus(queue)).paused, true);
      },
      { timeoutMs: TIMEOUT_MS },
    );

    storeTest(
      fixture,
      'an unknown queue or message is a 404 page, bad paging a 400 page, never a stack trace',
      async (h) => {
        const queue = h.queue('jobs');
        await h.client.enqueue(queue, 1, { id: 'one' });
        const url = await serveDashboard(h);
        const page = await openPage(h, browser);
        const cases: [string, number, RegExp][] = [
          [`queues/no-such-queue`, 404, /no queue named 'no-such-queue'/],
          [`queues/${queue}/messages/nope`, 404, /no message 'nope'/],
          [`queues/%E0%A4%A/messages/x`, 404, /no such queue/],
          [`queues/${queue}?limit=0`, 400, /limit must be a whole number from 1 to 1000/],
          [`queues/${queue}?state=lost`, 400, /state must be one of/],
          [`queues/${queue}?cursor=garbage`, 400, /cursor/],
          [`nothing/here`, 404, /no page at/],
        ];
        for (const [path, status, text] of cases) {
          const response = await visit(page, url + path);
          assert.equal(response.status(), status, path);
          const body = await inPage<string>(page, 'document.body.innerText');
          assert.match(body, text, path);
          assert.doesNotMatch(body, /\n\s+at /, `${path}: no stack trace`);
        }
      },
      { timeoutMs: TIMEOUT_MS },
    );
  });
}

browserSuite(tempSqlite('dashboard'));

const redis = process.env.KVMQ_TEST_REDIS_URL;
if (redis !== undefined && redis !== '') {
  const prefixes: string[] = [];
  after(() => deletePrefixes(redis, prefixes));
  browserSuite({
    name: 'redis',
    url() {
      const prefix = `kvmq-dashboard-${process.pid}-${randomBytes(3).toString('hex')}`;
      prefixes.push(prefix);
      return Promise.resolve(`${redis}?prefix=${prefix}`);
    },
  });
}

/** docs/dashboard-*.png, written when KVMQ_SCREENSHOTS=1 (npm run dashboard-screenshots). */
if (process.env.KVMQ_SCREENSHOTS === '1') {
  void describe('dashboard screenshots', () => {
    storeTest(
      tempSqlite('dashboard-shots'),
      'docs/dashboard-queues.png, -queue.png, -message.png',
      async (h) => {
        const url = await serveDashboard(h);
        const page = await openPage(h, browser);
        await seedScreenshotQueues(h, Number(process.env.KVMQ_SCREENSHOT_TRAFFIC_MS ?? 0));
        const docs = join(import.meta.dirname, '..', 'docs');
        const shots: [string, string][] = [
          ['', 'dashboard-queues.png'],
          ['queues/orders', 'dashboard-queue.png'],
          ['queues/orders/messages/order-1042', 'dashboard-message.png'],
        ];
        for (const [path, file] of shots) {
          await visit(page, url + path);
          await page.waitForNetworkIdle({ idleTime: 300, timeout: 10_000 }).catch(() => undefined);
          await page.screenshot({ path: join(docs, file), type: 'png' });
        }
      },
      { timeoutMs: 900_000 },
    );
  });
}
