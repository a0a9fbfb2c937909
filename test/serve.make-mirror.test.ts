/**
 * The way from kvmq serve to a real etcd cluster: `etcdctl make-mirror` reads kvmq serve as it reads an
 * etcd (a range at one revision, then a watch from the next) and copies every key into etcd 3.4, a kvmq
 * queue's keys included, then keeps copying what changes.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, test } from 'node:test';
import { startEtcd, type ServerHandle } from './fixtures/serve-support.js';
import { startGatewayServe, type GatewayServe } from './fixtures/gateway-support.js';
import { b64, post } from './fixtures/gateway-http.js';
import { waitFor } from './support/wait.js';

const KEYS = 300;
const MESSAGES = 20;

let etcd: ServerHandle;
let kvmq: GatewayServe;

before(async () => {
  [etcd, kvmq] = await Promise.all([startEtcd(), startGatewayServe()]);
});

after(async () => {
  await Promise.allSettled([etcd.stop(), kvmq.stop()]);
});

/** Every key and its value (base64), read through a gateway. */
async function everything(base: string): Promise<Map<string, string>> {
  // From the first key there is to the end of the keyspace.
  const reply = await post(base, '/v3/kv/range', { key: b64('\0'), range_end: b64('\0') });
  assert.equal(reply.status, 200, reply.text);
  const { kvs = [] } = JSON.parse(reply.text) as { kvs?: { key: string; value?: string }[] };
  return new Map(kvs.map((kv) => [Buffer.from(kv.key, 'base64').toString(), kv.value ?? '']));
}

async function put(key: string, value: string): Promise<void> {
  const reply = await post(kvmq.url, '/v3/kv/put', { key: b64(key), value: b64(value) });
  assert.equal(reply.status, 200, reply.text);
}

test('etcdctl make-mirror copies every key from kvmq serve into etcd 3.4, and what comes after', async () => {
  for (let i = 0; i < KEYS; i++) await put(`app/config/${String(i).padStart(4, '0')}`, `value ${i}`);
  for (let i = 0; i < MESSAGES; i++) await put(`/queue/mirrored/producer/job-${i}`, `job ${i}`);
  // The dispatcher inside kvmq serve moves the produced messages into the ordered queue first.
  await waitFor(async () => ![...(await everything(kvmq.url)).keys()].some((key) => key.includes('/producer/')), {
    timeoutMs: 20_000,
    what: 'the producer keys moved into the queue',
  });
  const mirror = spawn('etcdctl', [`--endpoints=${kvmq.grpcEndpoint}`, 'make-mirror', etcd.endpoint], {
    env: { ...process.env, ETCDCTL_API: '3' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  mirror.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  mirror.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const exited = new Promise<void>((resolve) => mirror.on('exit', () => resolve()));
  try {
    const source = await everything(kvmq.url);
    assert.ok(source.size >= KEYS + MESSAGES * 2, `only ${source.size} keys in kvmq serve`);
    assert.ok([...source.keys()].some((key) => key.startsWith('/queue/mirrored/kvmq/msg/')));
    await waitFor(
      async () => {
        const copied = await everything(`http://${etcd.endpoint}`);
        return [...source].every(([key, value]) => copied.get(key) === value);
      },
      { timeoutMs: 30_000, what: () => `every key in etcd (make-mirror said: ${output})` },
    );
    await put('app/late', 'written while mirroring');
    await waitFor(
      async () => (await everything(`http://${etcd.endpoint}`)).get('app/late') === b64('written while mirroring'),
      {
        timeoutMs: 30_000,
        what: () => `the late key in etcd (make-mirror said: ${output})`,
      },
    );
  } finally {
    mirror.kill('SIGKILL');
    await exited;
  }
});
