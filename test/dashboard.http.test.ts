/**
 * The dashboard as an attacker and a careless caller meet it, over HTTP without a browser: Host and token
 * checks, CSRF and Origin on POSTs, escaping of stored text, oversized and malformed input, the live-update
 * cap; and the committed browser bundle is what `npm run dashboard-assets` makes.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer as createHttpServer, request } from 'node:http';
import { createServer as createHttpsServer, request as httpsRequest } from 'node:https';
import { connect as connectTcp } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { DASHBOARD_SERVER_LIMITS } from '../src/dashboard/server.js';
import { createDashboard } from '../src/index.js';
import { serveDashboard } from './fixtures/browser.js';
import { tempSqlite } from './fixtures/sqlite-temp.js';
import { storeTest } from './support/harness.js';
import { waitFor } from './support/wait.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const sqlite = tempSqlite('dashboard-http');

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

/** One HTTP/1.1 request with exactly the headers given (a browser would add some; an attacker need not). */
function call(
  base: string,
  path: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<Answer> {
  const url = new URL(path, base);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname + url.search,
        method: options.method ?? 'GET',
        headers: options.headers,
        agent: false,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

/** The session cookie and CSRF token a page gives a browser. */
async function session(
  base: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ cookie: string; csrf: string }> {
  const page = await call(base, path, { headers });
  assert.equal(page.status, 200);
  const setCookie = [page.headers['set-cookie'] ?? []].flat();
  const cookie = setCookie.map((c) => c.split(';', 1)[0]).join('; ');
  const csrf = /name="_csrf" value="([^"]+)"/.exec(page.body)?.[1];
  assert.ok(csrf !== undefined, 'the page carries a CSRF token');
  return { cookie, csrf };
}

function form(fields: Record<string, string>): { headers: Record<string, string>; body: string } {
  const body = new URLSearchParams(fields).toString();
  return {
    headers: { 'content-type': 'application/x-www-form-urlencoded', 'content-length': String(body.length) },
    body,
  };
}

void test('src/dashboard/assets.generated.ts is what npm run dashboard-assets makes of the browser sources', () => {
  execFileSync(process.execPath, ['scripts/dashboard-assets.mjs', '--check'], { cwd: ROOT, stdio: 'pipe' });
});

storeTest(sqlite, 'stored text is escaped on every page, and pages carry the security headers', async (h) => {
  const queue = h.queue('jobs');
  const evil = '<script>alert(1)</script>"\'&';
  await h.client.enqueue(queue, { html: evil }, { id: 'evil', metadata: { note: evil }, attempts: 1 });
  h.worker(queue, () => ({ status: 'error', error: evil }));
  await waitFor(async () => (await h.client.status(queue, 'evil'))?.state === 'failed');
  const url = await serveDashboard(h);
  for (const path of [`queues/${queue}`, `queues/${queue}?state=failed`, `queues/${queue}/messages/evil`]) {
    const page = await call(url, path);
    assert.equal(page.status, 200);
    assert.ok(!page.body.includes('<script>alert'), `${path}: no stored markup`);
    assert.ok(page.body.includes('&lt;script&gt;alert(1)&lt;/script&gt;'), `${path}: the text, escaped`);
    assert.match(String(page.headers['content-security-policy']), /script-src 'self'/);
    assert.doesNotMatch(String(page.headers['content-security-policy']), /unsafe-inline/);
    assert.equal(page.headers['x-frame-options'], 'DENY');
    assert.equal(page.headers['x-content-type-options'], 'nosniff');
  }
});

storeTest(sqlite, 'without a token only loopback Host names are answered (DNS rebinding)', async (h) => {
  const url = await serveDashboard(h);
  const port = new URL(url).port;
  assert.equal((await call(url, '/', { headers: { host: `evil.example:${port}` } })).status, 403);
  for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`]) {
    assert.equal((await call(url, '/', { headers: { host } })).status, 200, host);
  }
  const proxied = await serveDashboard(h, { allowedHosts: ['queues.example.com'] });
  assert.equal((await call(proxied, '/', { headers: { host: 'queues.example.com' } })).status, 200);
});

storeTest(sqlite, 'with a token: a bearer header or the cookie a ?token= visit sets, compared whole', async (h) => {
  const token = randomBytes(24).toString('base64url');
  const url = await serveDashboard(h, { token });
  assert.equal((await call(url, '/')).status, 401);
  assert.equal((await call(url, '/', { headers: { authorization: `Bearer ${token.slice(0, -1)}` } })).status, 401);
  assert.equal((await call(url, '/', { headers: { authorization: `Bearer ${token}x` } })).status, 401);
  assert.equal((await call(url, '/', { headers: { authorization: `Bearer ${token}` } })).status, 200);
  const visit = await call(url, `/queues/x?state=failed&token=${token}`);
  assert.equal(visit.status, 303);
  assert.equal(visit.headers.location, '/queues/x?state=failed');
  const cookie = [visit.headers['set-cookie'] ?? []].flat().find((c) => c.startsWith('kvmq_token='));
  assert.ok(cookie !== undefined);
  assert.match(cookie, /HttpOnly/);
  assert.match(cookie, /SameSite=Strict/);
  assert.equal((await call(url, '/', { headers: { cookie: cookie.split(';', 1)[0] ?? '' } })).status, 200);
  assert.equal((await call(url, '/', { headers: { cookie: 'kvmq_token=guess' } })).status, 401);
});

storeTest(
  sqlite,
  'a POST needs its session’s CSRF token and the same origin; read-only refuses them all',
  async (h) => {
    const queue = h.queue('jobs');
    await h.client.enqueue(queue, 1);
    const url = await serveDashboard(h);
    const { cookie, csrf } = await session(url, `/queues/${queue}`);
    const other = await session(url, `/queues/${queue}`);
    const pause = (fields: Record<string, string>, headers: Record<string, string> = {}): Promise<Answer> => {
      const f = form(fields);
      return call(url, `/queues/${queue}/pause`, {
        method: 'POST',
        headers: { ...f.headers, ...headers },
        body: f.body,
      });
    };
    assert.equal((await pause({})).status, 403, 'no cookie, no token');
    assert.equal((await pause({}, { cookie })).status, 403, 'no token');
    assert.equal((await pause({ _csrf: 'A'.repeat(43) }, { cookie })).status, 403, 'a made-up token');
    assert.equal((await pause({ _csrf: other.csrf }, { cookie })).status, 403, "another session's token");
    assert.equal((await pause({ _csrf: csrf })).status, 403, 'a token without its cookie');
    assert.equal((await pause({ _csrf: csrf }, { cookie, origin: 'http://evil.example' })).status, 403, 'cross origin');
    assert.equal((await pause({ _csrf: csrf }, { cookie, 'sec-fetch-site': 'cross-site' })).status, 403);
    assert.equal((await h.client.queueStatus(queue)).paused, false, 'nothing refused took effect');
    const done = await pause({ _csrf: csrf }, { cookie, origin: new URL(url).origin });
    assert.equal(done.status, 303);
    assert.equal((await h.client.queueStatus(queue)).paused, true);

    const readOnly = await serveDashboard(h, { readOnly: true });
    const ro = await session(url, `/queues/${queue}`);
    const f = form({ _csrf: ro.csrf });
    const refused = await call(readOnly, `/queues/${queue}/resume`, {
      method: 'POST',
      headers: { ...f.headers, cookie: ro.cookie },
      body: f.body,
    });
    assert.equal(refused.status, 403);
    assert.equal((await h.client.queueStatus(queue)).paused, true);
  },
);

storeTest(sqlite, 'oversized, malformed and unexpected requests get a 4xx page, never a 500', async (h) => {
  const queue = h.queue('jobs');
  await h.client.enqueue(queue, 1, { id: 'one' });
  const url = await serveDashboard(h);
  const { cookie, csrf } = await session(url, `/queues/${queue}`);
  const big = `_csrf=${csrf}&pad=${'x'.repeat(64 * 1024)}`;
  const tooBig = await call(url, `/queues/${queue}/pause`, {
    method: 'POST',
    headers: { cookie, 'content-type': 'application/x-www-form-urlencoded', 'content-length': String(big.length) },
    body: big,
  });
  assert.equal(tooBig.status, 413);
  const json = await call(url, `/queues/${queue}/pause`, {
    method: 'POST',
    headers: { cookie, 'content-type': 'application/json' },
    body: '{}',
  });
  assert.equal(json.status, 400);
  assert.equal((await call(url, `/queues/${queue}`, { headers: { 'x-big': 'y'.repeat(32 * 1024) } })).status, 431);
  const cases: [string, string, number][] = [
    ['PUT', `/queues/${queue}`, 405],
    ['DELETE', `/queues/${queue}/messages/one`, 405],
    ['GET', `/queues/${queue}/pause`, 405],
    ['GET', '/queues/%ZZ', 404],
    ['GET', `/queues/${'q'.repeat(300)}`, 404],
    ['GET', `/queues/${queue}/messages/${'%F0%9F%92%A9'.repeat(3)}`, 404],
    ['GET', '/assets/../../etc/passwd', 404],
    ['GET', '/assets/app.js', 404],
    ['GET', `/queues/${queue}?limit=1e3`, 400],
    ['GET', `/queues/${queue}?limit=-1`, 400],
    ['GET', `/queues/${queue}?cursor=${'a'.repeat(5000)}`, 400],
  ];
  for (const [method, path, status] of cases) {
    const answer = await call(url, path, { method });
    assert.equal(answer.status, status, `${method} ${path}`);
  }
  // Still answering.
  assert.equal((await call(url, `/queues/${queue}`)).status, 200);
});

storeTest(sqlite, 'live updates are capped; a closed stream frees its place and its poller', async (h) => {
  const queue = h.queue('jobs');
  await h.client.enqueue(queue, 1);
  const url = await serveDashboard(h, { maxLiveClients: 2 });
  const { port } = new URL(url);
  const open = (): Promise<{ status: string; close: () => void }> =>
    new Promise((resolve, reject) => {
      const socket = connectTcp(Number(port), '127.0.0.1', () => {
        socket.write(`GET /queues/${queue}/live HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
      });
      socket.once('data', (chunk) =>
        resolve({ status: chunk.toString('latin1').split('\r\n', 1)[0] ?? '', close: () => socket.destroy() }),
      );
      socket.once('error', reject);
    });
  const first = await open();
  const second = await open();
  assert.match(first.status, / 200 /);
  assert.match(second.status, / 200 /);
  const third = await open();
  assert.match(third.status, / 503 /);
  third.close();
  first.close();
  const fourth = await waitFor(async () => {
    const attempt = await open();
    if (/ 200 /.test(attempt.status)) return attempt;
    attempt.close();
    return null;
  });
  second.close();
  fourth.close();
});

storeTest(sqlite, 'mounted under a base path in an app’s own server, beside its other routes', async (h) => {
  const queue = h.queue('jobs');
  await h.client.enqueue(queue, 1, { id: 'one' });
  const dashboard = createDashboard(h.client, { basePath: '/ops/kvmq' });
  const app = createHttpServer((req, res) => {
    if (req.url?.startsWith('/ops/kvmq')) dashboard(req, res);
    else res.end('the app');
  });
  await new Promise<void>((resolve) => app.listen(0, '127.0.0.1', resolve));
  h.cleanup(() => {
    dashboard.close();
    return new Promise<void>((resolve) => app.close(() => resolve()));
  });
  const address = app.address();
  const url = `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}`;
  assert.equal((await call(url, '/')).body, 'the app');
  const bare = await call(url, '/ops/kvmq?state=failed');
  assert.equal(bare.status, 303);
  assert.equal(bare.headers.location, '/ops/kvmq/?state=failed');
  const page = await call(url, `/ops/kvmq/queues/${queue}`);
  assert.equal(page.status, 200);
  assert.match(page.body, new RegExp(`href="/ops/kvmq/queues/${queue}/messages/one"`));
  assert.match(page.body, /src="\/ops\/kvmq\/assets\/app\.[0-9a-f]{12}\.js"/);
  assert.match(String(page.headers['set-cookie']), /Path=\/ops\/kvmq;/);
  const { cookie, csrf } = await session(url, `/ops/kvmq/queues/${queue}`);
  const f = form({ _csrf: csrf });
  const paused = await call(url, `/ops/kvmq/queues/${queue}/pause`, {
    method: 'POST',
    headers: { ...f.headers, cookie },
    body: f.body,
  });
  assert.equal(paused.status, 303);
  assert.equal(paused.headers.location, `/ops/kvmq/queues/${queue}?done=paused`);
  assert.equal((await h.client.queueStatus(queue)).paused, true);
  const script = /src="(\/ops\/kvmq\/assets\/[^"]+)"/.exec(page.body)?.[1] ?? '';
  const asset = await call(url, script);
  assert.equal(asset.status, 200);
  assert.match(String(asset.headers['content-type']), /text\/javascript/);
  assert.match(String(asset.headers['cache-control']), /immutable/);
});

storeTest(
  sqlite,
  'a client that sends its headers too slowly is cut off while others are answered',
  async (h) => {
    const url = await serveDashboard(h);
    const { port } = new URL(url);
    const slow = connectTcp(Number(port), '127.0.0.1');
    let closed = false;
    slow.on('close', () => (closed = true));
    slow.on('error', () => undefined);
    slow.on('data', () => undefined);
    await new Promise<void>((resolve) => slow.once('connect', resolve));
    slow.write(`GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n`);
    // A header line now and then, never the blank line that ends them.
    const drip = setInterval(() => slow.write('X-Drip: 1\r\n'), 1000);
    h.cleanup(() => {
      clearInterval(drip);
      slow.destroy();
    });
    assert.equal((await call(url, '/')).status, 200, 'others are answered meanwhile');
    await waitFor(() => closed, { timeoutMs: DASHBOARD_SERVER_LIMITS.headersTimeoutMs * 3, what: 'the cut' });
  },
  { timeoutMs: 60_000 },
);

storeTest(sqlite, 'mounted on https, its cookies are marked Secure', async (h) => {
  const dir = await mkdtemp(join(tmpdir(), 'kvmq-dashboard-tls-'));
  h.cleanup(() => rm(dir, { recursive: true, force: true }));
  // A self-signed certificate for the test.
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', 'key.pem'].concat([
      '-out',
      'cert.pem',
      '-days',
      '1',
      '-subj',
      '/CN=localhost',
    ]),
    { cwd: dir, stdio: 'ignore' },
  );
  const dashboard = createDashboard(h.client);
  const server = createHttpsServer(
    { key: await readFile(join(dir, 'key.pem')), cert: await readFile(join(dir, 'cert.pem')) },
    dashboard,
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  h.cleanup(() => {
    dashboard.close();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  const cookies = await new Promise<string[]>((resolve, reject) => {
    const req = httpsRequest({ host: '127.0.0.1', port, path: '/', rejectUnauthorized: false, agent: false }, (res) => {
      res.resume();
      resolve([res.headers['set-cookie'] ?? []].flat());
    });
    req.on('error', reject);
    req.end();
  });
  assert.ok(cookies.length > 0);
  for (const cookie of cookies) assert.match(cookie, /; HttpOnly; SameSite=Strict; Secure$/);
});

storeTest(sqlite, "the message page's Cancel fails a waiting message; a finished one is refused", async (h) => {
  const queue = h.queue('jobs');
  await h.client.enqueue(queue, 1, { id: 'later', initialBackoffMs: 600_000 });
  const url = await serveDashboard(h);
  const page = `/queues/${queue}/messages/later`;
  const { cookie, csrf } = await session(url, page);
  assert.match((await call(url, page)).body, /action="[^"]*\/later\/cancel"/, 'a delayed message offers Cancel');
  const cancel = (): Promise<Answer> => {
    const f = form({ _csrf: csrf });
    return call(url, `${page}/cancel`, {
      method: 'POST',
      headers: { ...f.headers, cookie, origin: new URL(url).origin },
      body: f.body,
    });
  };
  const done = await cancel();
  assert.equal(done.status, 303);
  assert.match(String(done.headers.location), /done=canceled/);
  const status = await h.client.status(queue, 'later');
  assert.equal(status?.state, 'failed');
  assert.equal(status.lastError, 'canceled');
  assert.doesNotMatch((await call(url, page)).body, /\/later\/cancel"/, 'a failed message offers no Cancel');
  assert.match(String((await cancel()).headers.location), /done=refused&state=failed/);
});
