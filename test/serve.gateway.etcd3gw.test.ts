/**
 * A Python client produces and consumes a kvmq queue through kvmq serve's JSON gateway: Debian's etcd3gw
 * (an etcd client that speaks only the gateway), with the dispatcher running inside kvmq serve. The
 * producer puts /queue/{q}/producer/{id}; the consumer registers on a lease, watches its own prefix and
 * deletes each delivery, which acknowledges it.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, test } from 'node:test';
import { startGatewayServe, type GatewayServe } from './fixtures/gateway-support.js';
import { b64, post } from './fixtures/gateway-http.js';

const QUEUE = 'pyjobs';
const MESSAGES = 25;

// The consumer holds one delivery at a time (a plain registration): it deletes each, and the dispatcher
// sends the next. It prints what it received as one JSON line.
const SCRIPT = String.raw`
import json, sys, threading
from etcd3gw.client import Etcd3Client

host, port, queue, count = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
# etcd 3.4 serves /v3/ (etcd3gw's default, /v3alpha/, went with 3.3).
client = Etcd3Client(host=host, port=port, api_path='/v3/', timeout=10)
me = '/queue/%s/consumer/py-worker' % queue
events, cancel = client.watch_prefix(me + '/')
lease = client.lease(ttl=30)
client.put(me, 'python-host', lease=lease)
for i in range(count):
    client.put('/queue/%s/producer/msg-%d' % (queue, i), 'payload %d' % i)

received = {}
timer = threading.Timer(60, cancel)
timer.start()
for event in events:
    if event.get('type') == 'DELETE':
        continue
    key = event['kv']['key'].decode()
    received[key.rsplit('/', 1)[1]] = event['kv']['value'].decode()
    client.delete(key)
    if len(received) == count:
        break
timer.cancel()
cancel()
lease.revoke()
print(json.dumps(received, sort_keys=True))
`;

let kvmq: GatewayServe;

before(async () => {
  kvmq = await startGatewayServe();
});

after(async () => {
  await kvmq.stop();
});

// Debian's python3-etcd3gw is installed for Debian's own Python, which another python3 on PATH may not see.
const PYTHON = '/usr/bin/python3';

function runPython(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(PYTHON, ['-c', SCRIPT, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), 90_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

test('etcd3gw produces and consumes a kvmq queue through the gateway', async () => {
  const url = new URL(kvmq.url);
  const run = await runPython([url.hostname, url.port, QUEUE, String(MESSAGES)]);
  assert.equal(run.code, 0, run.stderr);
  const received = JSON.parse(run.stdout) as Record<string, string>;
  const expected = Object.fromEntries(Array.from({ length: MESSAGES }, (_, i) => [`msg-${i}`, `payload ${i}`]));
  assert.deepEqual(received, expected);
  // Nothing is left to deliver: no producer keys, no deliveries, and the dispatcher saw every ack.
  for (const prefix of [`/queue/${QUEUE}/producer/`, `/queue/${QUEUE}/consumer/`]) {
    const reply = await post(kvmq.url, '/v3/kv/range', {
      key: b64(prefix),
      range_end: b64(prefix.slice(0, -1) + '0'),
      count_only: true,
    });
    assert.equal((JSON.parse(reply.text) as { count?: string }).count, undefined, `${prefix}: ${reply.text}`);
  }
});
