/**
 * `kvmq dashboard` as a user runs it: prints its URL and serves, stops on SIGTERM; refuses a non-loopback
 * address without a token (exit 2) and names --listen when the port is taken.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { tempSqlite } from './fixtures/sqlite-temp.js';
import { waitFor } from './support/wait.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const MAIN = join(ROOT, 'src/cli/main.ts');
const sqlite = tempSqlite('cli-dashboard');

function kvmq(args: string[], store: string): { code: number | null; stderr: string } {
  const result = spawnSync(process.execPath, ['--import', 'tsx', MAIN, ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, KVMQ_STORE: store, KVMQ_DASHBOARD_TOKEN: '' },
    timeout: 30_000,
  });
  return { code: result.status, stderr: result.stderr };
}

void test('kvmq dashboard prints its URL, serves the store, and stops on SIGTERM', { timeout: 60_000 }, async () => {
  const store = await sqlite.url();
  assert.equal(kvmq(['enqueue', 'jobs', '{"a":1}'], store).code, 0);
  const token = 'a-token-of-24-characters';
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', MAIN, 'dashboard', '--listen', '127.0.0.1:0', '--token', token],
    {
      cwd: ROOT,
      env: { ...process.env, KVMQ_STORE: store },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  after(() => child.kill('SIGKILL'));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const lines: string[] = [];
  createInterface({ input: child.stdout }).on('line', (line) => lines.push(line));
  const line = await waitFor(() => lines.find((l) => l.startsWith('kvmq dashboard: ')), { timeoutMs: 30_000 });
  const url = /^kvmq dashboard: (http:\/\/127\.0\.0\.1:\d+\/)\?token=(\S+) \(store sqlite:/.exec(line);
  assert.ok(url !== null, line);
  assert.equal(url[2], token);
  const base = url[1] ?? '';
  assert.equal((await fetch(`${base}queues/jobs`)).status, 401);
  const page = await fetch(`${base}queues/jobs`, { headers: { authorization: `Bearer ${token}` } });
  assert.equal(page.status, 200);
  assert.match(await page.text(), /data-count="jobs" data-state="queued">1</);
  child.kill('SIGTERM');
  assert.equal(await exited, 0);
});

void test('kvmq dashboard refuses a reachable address without a token, and names --listen when taken', async () => {
  const store = await sqlite.url();
  const open = kvmq(['dashboard', '--listen', '0.0.0.0:0'], store);
  assert.equal(open.code, 2);
  assert.match(open.stderr, /--listen 0\.0\.0\.0:0 is reachable from other machines: give --token/);
  assert.equal(kvmq(['dashboard', '--token', 'short'], store).code, 2);
  const taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  after(() => taken.close());
  const address = taken.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  const busy = kvmq(['dashboard', '--listen', `127.0.0.1:${port}`], store);
  assert.equal(busy.code, 1);
  assert.match(busy.stderr, /cannot listen on 127\.0\.0\.1:\d+: the port is in use; choose another with --listen/);
});
