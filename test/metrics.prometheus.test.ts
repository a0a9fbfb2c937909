/**
 * A real Prometheus (Debian's package, installed when missing as the store servers are) scrapes
 * `kvmq work --metrics` every second; its HTTP API must give back what the worker handled.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { ensure, start, type PrometheusServer } from '../scripts/servers/prometheus.mjs';
import { connect } from '../src/index.js';
import { startWithMetrics, type MetricsProcess } from './fixtures/metrics-process.js';
import { waitFor } from './support/wait.js';

let dir = '';
const stops: (() => Promise<unknown>)[] = [];

before(async () => {
  ensure();
  dir = await mkdtemp(join(tmpdir(), 'kvmq-prometheus-'));
});

after(async () => {
  for (const stop of stops.reverse()) await stop();
  await rm(dir, { recursive: true, force: true });
});

/** One instant query through Prometheus' HTTP API: the value of its single result, or null while it has none. */
async function query(prometheus: PrometheusServer, promql: string): Promise<number | null> {
  const response = await fetch(`${prometheus.url}/api/v1/query?query=${encodeURIComponent(promql)}`);
  const body = (await response.json()) as { status: string; data: { result: { value: [number, string] }[] } };
  assert.equal(body.status, 'success', JSON.stringify(body));
  const [first] = body.data.result;
  return first === undefined ? null : Number(first.value[1]);
}

async function started(process: Promise<MetricsProcess>): Promise<MetricsProcess> {
  const running = await process;
  stops.push(() => running.stop());
  return running;
}

test('Prometheus scrapes kvmq work and kvmq serve and reads back their counters', { timeout: 120_000 }, async () => {
  const store = `sqlite:${join(dir, 'work.db')}`;
  const client = await connect(store, { maintenance: false });
  const handled = 25;
  try {
    await client.enqueueBatch(
      'jobs',
      Array.from({ length: handled }, (_, i) => ({ payload: { i } })),
    );
    await client.enqueue('jobs', 'fails', { id: 'bad' });
  } finally {
    await client.close();
  }
  const work = await started(
    startWithMetrics(['work', 'jobs', '--exec', 'test "$KVMQ_ID" != bad', '--metrics', '127.0.0.1:0'], {
      KVMQ_STORE: store,
    }),
  );
  const serve = await started(
    startWithMetrics(['serve', '--data', join(dir, 'serve'), '--listen', '127.0.0.1:0', '--metrics', '127.0.0.1:0']),
  );
  // The endpoint line comes on stdout once the server (and its dashboard) is up, which may be after the metrics line.
  const etcdUrl = await waitFor(() => /etcd v3 API on (http:\/\/\S+)/.exec(serve.stdout())?.[1], {
    timeoutMs: 30_000,
    what: () => `the etcd endpoint; stdout:\n${serve.stdout()}`,
  });
  const puts = 7;
  for (let i = 0; i < puts; i++) {
    const body = JSON.stringify({ key: Buffer.from(`k${i}`).toString('base64'), value: 'dg==' });
    assert.equal((await fetch(`${etcdUrl}/v3/kv/put`, { method: 'POST', body })).status, 200);
  }
  const promDir = join(dir, 'prometheus');
  const prometheus = await start(promDir, [`127.0.0.1:${work.port}`, `127.0.0.1:${serve.port}`]);
  stops.push(() => prometheus.stop());

  const success = 'kvmq_messages_handled_total{queue="jobs",outcome="success"}';
  const seen = await waitFor(async () => ((await query(prometheus, success)) === handled ? handled : null), {
    timeoutMs: 60_000,
    what: `Prometheus to report ${success} = ${handled}`,
  });
  assert.equal(seen, handled);
  assert.equal(await query(prometheus, 'kvmq_messages_handled_total{queue="jobs",outcome="error"}'), 1);
  assert.equal(
    await waitFor(() => query(prometheus, 'kvmq_queue_messages{queue="jobs",state="failed"}'), {
      timeoutMs: 10_000,
    }),
    1,
  );
  const servePuts = 'kvmq_serve_requests_total{method="KV/Put",code="OK"}';
  assert.equal(
    await waitFor(async () => ((await query(prometheus, servePuts)) === puts ? puts : null), {
      timeoutMs: 30_000,
      what: `Prometheus to report ${servePuts} = ${puts}`,
    }),
    puts,
  );
  assert.equal(await query(prometheus, 'sum(up{job="kvmq"})'), 2);
});
