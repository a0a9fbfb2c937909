/**
 * `kvmq serve` also serves the dashboard over its own queues, at /dashboard/ on its port, and prints its
 * address beside the etcd endpoint; --no-dashboard turns it off, and a non-loopback --listen needs a token.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { connect } from '../src/index.js';
import { serveFromCli, type ServedFromCli } from './fixtures/serve-cli.js';
import { waitFor } from './support/wait.js';

const dirs: string[] = [];
after(() => Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true }))));

/** `kvmq serve` on a fresh data dir. */
async function serve(args: readonly string[]): Promise<ServedFromCli> {
  const dir = await mkdtemp(join(tmpdir(), 'kvmq-serve-dashboard-'));
  dirs.push(dir);
  return serveFromCli(dir, args);
}

void test('kvmq serve prints its dashboard URL and serves it over its own queues', { timeout: 60_000 }, async () => {
  const server = await serve(['--listen', '127.0.0.1:0']);
  const line = await waitFor(() => server.out.find((l) => l.startsWith('  dashboard: ')), { what: 'the URL' });
  const url = line.slice('  dashboard: '.length);
  assert.equal(url, `http://${server.endpoint}/dashboard/`);
  const client = await connect(`etcd://${server.endpoint}`, { maintenance: false });
  try {
    await client.enqueueBatch('jobs', [{ payload: 1 }, { payload: 2 }, { payload: 3 }]);
  } finally {
    await client.close();
  }
  const page = await fetch(`${url}queues/jobs?state=queued`);
  assert.equal(page.status, 200);
  const html = await page.text();
  assert.match(html, /data-count="jobs" data-state="queued">3</);
  assert.equal((await fetch(`${url}queues/none`)).status, 404);
  // The etcd gateway still answers beside it.
  const range = await fetch(`http://${server.endpoint}/v3/kv/range`, { method: 'POST', body: '{"key":"AA=="}' });
  assert.equal(range.status, 200);
  assert.equal(await server.stop(), 0);
});

void test(
  'a payload put through the JSON gateway, as curl does, reads as text on its page',
  { timeout: 60_000 },
  async () => {
    const server = await serve(['--listen', '127.0.0.1:0']);
    const b64 = (text: string): string => Buffer.from(text, 'utf8').toString('base64');
    const put = await fetch(`http://${server.endpoint}/v3/kv/put`, {
      method: 'POST',
      body: JSON.stringify({
        key: b64('/queue/mail/producer/from-curl'),
        value: b64('{"to":"ana@example.com","n":1.50}'),
      }),
    });
    assert.equal(put.status, 200);
    // The dispatcher inside turns the plain put into a message: its page shows the bytes as JSON text.
    const page = await waitFor(
      async () => {
        const answer = await fetch(`http://${server.endpoint}/dashboard/queues/mail/messages/from-curl`);
        return answer.status === 200 ? answer.text() : undefined;
      },
      { what: 'the message page' },
    );
    assert.match(page, /<h2>Payload <span class="muted">\(33 bytes, JSON\)<\/span><\/h2>/);
    assert.ok(page.includes('{\n  &quot;to&quot;: &quot;ana@example.com&quot;,\n  &quot;n&quot;: 1.50\n}'), 'laid out');
    assert.equal(await server.stop(), 0);
  },
);

void test(
  '--no-dashboard leaves /dashboard/ to the gateway; a non-loopback --listen needs a token',
  { timeout: 60_000 },
  async () => {
    const off = await serve(['--listen', '127.0.0.1:0', '--no-dashboard']);
    assert.ok(!off.out.some((l) => l.includes('dashboard:')));
    assert.equal((await fetch(`http://${off.endpoint}/dashboard/`)).status, 404);
    assert.equal(await off.stop(), 0);

    const open = await serve(['--listen', '0.0.0.0:0']);
    assert.ok(!open.out.some((l) => l.includes('dashboard:')));
    assert.ok(
      open.err.some((l) => /dashboard off: --listen 0\.0\.0\.0:0 is reachable .* --dashboard-token/.test(l)),
      open.err.join('\n'),
    );
    assert.equal(await open.stop(), 0);
  },
);
