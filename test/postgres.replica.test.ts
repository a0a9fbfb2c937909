/**
 * A read replica for the dashboard's reads: a client opened on a hot standby migrates nothing, polls instead of
 * listening, reads what the primary wrote once it is replayed, and refuses writes clearly; a dashboard given it
 * as `readFrom` shows the replica's view while its actions reach the primary.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, chmodSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { connect, StoreLayoutError, StoreUrlError, type Client } from '../src/index.js';
import { startDashboardServer } from '../src/dashboard/server.js';
import { start, startReplica, type PostgresServer } from '../scripts/servers/postgres.mjs';
import { sql } from './fixtures/postgres-server.js';
import { waitFor } from './support/wait.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const MAIN = join(ROOT, 'src/cli/main.ts');
const dir = mkdtempSync(join(tmpdir(), 'kvmq-postgres-replica-'));
// The servers run as the postgres user when the tests run as root: they must reach their dirs below this one.
chmodSync(dir, 0o755);
const servers: PostgresServer[] = [];
const clients: Client[] = [];
const closers: (() => Promise<void>)[] = [];

after(async () => {
  for (const close of closers) await close();
  await Promise.all(clients.map((client) => client.close().catch(() => undefined)));
  for (const server of servers.reverse()) await server.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function open(url: string): Promise<Client> {
  const client = await connect(url, { maintenance: false });
  clients.push(client);
  return client;
}

function get(
  base: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string; cookie: string }> {
  return call(base, path, 'GET', headers);
}

function call(
  base: string,
  path: string,
  method: string,
  headers: Record<string, string>,
  body?: string,
): Promise<{ status: number; body: string; cookie: string }> {
  const url = new URL(path, base);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: url.hostname, port: url.port, path: url.pathname, method, headers, agent: false },
      (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
        res.on('end', () => {
          const cookie = [res.headers['set-cookie'] ?? []]
            .flat()
            .map((c) => c.split(';', 1)[0])
            .join('; ');
          resolve({ status: res.statusCode ?? 0, body: text, cookie });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

void test('a dashboard reads from a hot standby and acts on the primary', async () => {
  const primaryDir = join(dir, 'primary');
  const replicaDir = join(dir, 'replica');
  for (const path of [primaryDir, replicaDir]) {
    mkdirSync(path);
    chmodSync(path, 0o755);
  }
  const primary = await start(primaryDir);
  servers.push(primary);
  const url = (server: PostgresServer): string => `${server.url}?schema=kvmq_replica`;
  const writer = await open(url(primary));
  const q = 'orders';
  await writer.enqueueBatch(q, [
    { id: 'a', payload: 1 },
    { id: 'b', payload: 2 },
  ]);
  const replica = await startReplica(primary, replicaDir);
  servers.push(replica);
  const recovery = await sql(replica.url, 'SELECT pg_is_in_recovery() AS r');
  assert.deepEqual(recovery.rows, [{ r: true }], 'a standby');

  // Opened on the standby: no migration is tried, and what the primary wrote is there.
  const reader = await open(url(replica));
  assert.equal((await reader.queueStatus(q)).counts.queued, 2);
  await assert.rejects(reader.enqueue(q, 'x'), (error: unknown) => {
    assert.ok(error instanceof StoreUrlError, String(error));
    assert.match(error.message, /takes no writes.*write through the primary/);
    return true;
  });
  const worker = reader.worker(q, () => undefined, { autoStart: false });
  await assert.rejects(worker.start(), StoreUrlError, 'a worker cannot register on a standby');
  // A schema the primary never made is not created on the standby: a clear refusal.
  await assert.rejects(connect(`${replica.url}?schema=kvmq_never`, { maintenance: false }), StoreLayoutError);

  const dashboard = await startDashboardServer(writer, { listen: '127.0.0.1:0', readFrom: reader });
  closers.push(() => dashboard.close());
  const home = await get(dashboard.url, '/');
  assert.equal(home.status, 200);
  assert.match(home.body, /pages read from postgres:\/\/127\.0\.0\.1:\d+\/postgres/);
  assert.ok(!home.body.includes('kvmq-test'), 'no password on the page');

  // Replay paused: the primary's new queue is not on the pages (they read the replica) ...
  await sql(replica.url, 'SELECT pg_wal_replay_pause()');
  await writer.enqueue('fresh', 'new', { id: 'n' });
  assert.ok((await writer.queues()).includes('fresh'));
  assert.ok(!(await get(dashboard.url, '/')).body.includes('/queues/fresh'), 'the page shows the replica');
  // ... while an action on the page goes to the primary.
  const page = await get(dashboard.url, `/queues/${q}`);
  const csrf = /name="_csrf" value="([^"]+)"/.exec(page.body)?.[1] ?? '';
  const form = `_csrf=${encodeURIComponent(csrf)}`;
  const paused = await call(
    dashboard.url,
    `/queues/${q}/pause`,
    'POST',
    {
      'content-type': 'application/x-www-form-urlencoded',
      'content-length': String(Buffer.byteLength(form)),
      cookie: page.cookie,
      origin: new URL(dashboard.url).origin,
    },
    form,
  );
  assert.equal(paused.status, 303);
  assert.equal((await writer.queueStatus(q)).paused, true, 'paused on the primary');
  assert.equal((await reader.queueStatus(q)).paused, false, 'not yet replayed');

  await sql(replica.url, 'SELECT pg_wal_replay_resume()');
  await waitFor(async () => (await get(dashboard.url, '/')).body.includes('/queues/fresh'), {
    what: 'the replayed queue on the page',
  });
  assert.equal((await reader.queueStatus(q)).paused, true);

  // The same from the CLI: `kvmq dashboard --read-store`.
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', MAIN, 'dashboard', '--listen', '127.0.0.1:0', '--read-store', url(replica)],
    { cwd: ROOT, env: { ...process.env, KVMQ_STORE: url(primary) }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  closers.push(() => Promise.resolve(void child.kill('SIGKILL')));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const lines: string[] = [];
  createInterface({ input: child.stdout }).on('line', (line) => lines.push(line));
  const banner = await waitFor(() => lines.find((line) => line.startsWith('kvmq dashboard: ')), { timeoutMs: 30_000 });
  const served =
    /^kvmq dashboard: (http:\/\/127\.0\.0\.1:\d+\/) \(store postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:\d+\/postgres\?schema=kvmq_replica, pages read from postgres:\/\/postgres:\*\*\*@127\.0\.0\.1:(\d+)\//.exec(
      banner,
    );
  assert.ok(served !== null, banner);
  assert.equal(Number(served[2]), replica.port);
  assert.match((await get(served[1] ?? '', '/')).body, /\/queues\/fresh/);
  child.kill('SIGTERM');
  assert.equal(await exited, 0);
});
