/**
 * kvmq serve's own metrics: calls by method and status (gRPC and the JSON gateway), WAL syncs, and the gauges
 * read at scrape time (database size, watchers, leases, revision, dispatcher backlog per queue); then
 * `kvmq serve --metrics` as a process, and its address errors.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Etcd3 } from 'etcd3';
import { ServeMetrics } from '../src/serve/metrics.js';
import { startGatewayServe, type GatewayServe } from './fixtures/gateway-support.js';
import { httpRequest, startWithMetrics } from './fixtures/metrics-process.js';
import { parseExposition, type Exposition } from './metrics/exposition.js';
import { waitFor } from './support/wait.js';

const b64 = (text: string): string => Buffer.from(text).toString('base64');

async function call(serve: GatewayServe, path: string, body: unknown): Promise<number> {
  const response = await fetch(`${serve.url}/v3/${path}`, { method: 'POST', body: JSON.stringify(body) });
  await response.arrayBuffer();
  return response.status;
}

describe('kvmq serve metrics', () => {
  let metrics: ServeMetrics;
  let serve: GatewayServe;

  before(async () => {
    metrics = await ServeMetrics.create();
    serve = await startGatewayServe({ instruments: metrics, log: () => undefined });
    metrics.bind(serve.server);
  });

  after(async () => {
    await serve.stop();
  });

  const scrape = async (): Promise<Exposition> => parseExposition(await metrics.registry.metrics());

  test('calls by method and status, syncs, and the scrape-time gauges', async () => {
    const before = await scrape();
    const revision = before.value('kvmq_serve_revision') ?? -1;
    for (let i = 0; i < 5; i++) assert.equal(await call(serve, 'kv/put', { key: b64(`k${i}`), value: b64('v') }), 200);
    for (let i = 0; i < 3; i++) assert.equal(await call(serve, 'kv/range', { key: b64('k0') }), 200);
    assert.equal(await call(serve, 'lease/revoke', { ID: '12345' }), 404);
    assert.equal(await call(serve, 'lease/grant', { TTL: 60 }), 200);

    const etcd = new Etcd3({ hosts: serve.grpcEndpoint });
    try {
      const watcher = await etcd.watch().key('watched').create();
      const e = await scrape();
      assert.equal(e.value('kvmq_serve_requests_total', { method: 'KV/Put', code: 'OK' }), 5);
      assert.equal(e.value('kvmq_serve_requests_total', { method: 'KV/Range', code: 'OK' }), 3);
      assert.equal(e.value('kvmq_serve_requests_total', { method: 'Lease/LeaseRevoke', code: 'NOT_FOUND' }), 1);
      assert.equal(e.value('kvmq_serve_requests_total', { method: 'Lease/LeaseGrant', code: 'OK' }), 1);
      assert.equal(e.value('kvmq_serve_revision'), revision + 5);
      assert.ok((e.value('kvmq_serve_fsync_duration_seconds_count') ?? 0) >= 1, 'syncs timed');
      assert.ok((e.value('kvmq_serve_db_size_bytes') ?? 0) > 0);
      assert.ok((e.value('kvmq_serve_db_size_in_use_bytes') ?? 0) > 0);
      assert.equal(e.value('kvmq_serve_leases'), (before.value('kvmq_serve_leases') ?? 0) + 1);
      assert.equal(e.value('kvmq_serve_watchers'), (before.value('kvmq_serve_watchers') ?? 0) + 1);
      assert.deepEqual(
        [...e.types].filter(([name]) => name.startsWith('kvmq_serve_requests') || name.includes('fsync')),
        [
          ['kvmq_serve_requests_total', 'counter'],
          ['kvmq_serve_fsync_duration_seconds', 'histogram'],
        ],
      );
      await watcher.cancel();
      // The watch stream's end is counted when the client closes it.
      await waitFor(async () => (await scrape()).value('kvmq_serve_watchers') === before.value('kvmq_serve_watchers'), {
        what: 'the watcher to go',
      });
    } finally {
      etcd.close();
    }
  });

  test("a queue's dispatcher backlog: puts not yet moved, and how many revisions behind", async () => {
    assert.equal(await call(serve, 'kv/put', { key: b64('/queue/jobs/producer/a'), value: b64('hello') }), 200);
    const e = await waitFor(
      async () => {
        const e = await scrape();
        return e.value('kvmq_serve_dispatching', { queue: 'jobs' }) === 1 &&
          e.value('kvmq_serve_dispatcher_pending_puts', { queue: 'jobs' }) === 0
          ? e
          : null;
      },
      { what: 'the dispatcher to take the queue and move the put' },
    );
    assert.equal(e.value('kvmq_serve_dispatcher_lag_revisions', { queue: 'jobs' }), 0);
    assert.equal(e.types.get('kvmq_serve_dispatcher_lag_revisions'), 'gauge');
  });
});

describe('kvmq serve --metrics', () => {
  let dir = '';
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kvmq-serve-metrics-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  test('serves its metrics beside the etcd API', async () => {
    const serve = await startWithMetrics([
      'serve',
      '--data',
      join(dir, 'data'),
      '--listen',
      '127.0.0.1:0',
      '--metrics',
      '127.0.0.1:0',
    ]);
    try {
      // The endpoint line comes on stdout once the server (and its dashboard) is up, which may be after the metrics line.
      const endpoint = await waitFor(() => /etcd v3 API on (http:\/\/\S+)/.exec(serve.stdout())?.[1], {
        timeoutMs: 30_000,
        what: () => `the etcd endpoint; stdout:\n${serve.stdout()}`,
      });
      const put = await fetch(`${endpoint}/v3/kv/put`, {
        method: 'POST',
        body: JSON.stringify({ key: b64('a'), value: b64('b') }),
      });
      assert.equal(put.status, 200);
      const answer = await httpRequest(serve.url);
      assert.equal(answer.status, 200);
      const e = parseExposition(answer.body);
      assert.equal(e.value('kvmq_serve_requests_total', { method: 'KV/Put', code: 'OK' }), 1);
    } finally {
      assert.equal(await serve.stop('SIGTERM'), 0);
    }
  });

  test('a metrics port in use exits 2 naming --metrics, and the server stops', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = taken.address() as { port: number };
      const cli = fileURLToPath(new URL('../src/cli/main.ts', import.meta.url));
      const result = spawnSync(
        process.execPath,
        [
          '--import',
          'tsx',
          cli,
          'serve',
          '--data',
          join(dir, 'taken'),
          '--listen',
          '127.0.0.1:0',
          '--metrics',
          `127.0.0.1:${port}`,
        ],
        { encoding: 'utf8', timeout: 30_000 },
      );
      assert.equal(result.status, 2, result.stderr);
      assert.match(
        result.stderr,
        /cannot serve metrics on 127\.0\.0\.1:\d+: the address is in use; choose another --metrics/,
      );
    } finally {
      taken.close();
    }
  });
});
