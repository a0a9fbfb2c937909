/**
 * `kvmq work --metrics`: the exposition server as an attacker would try it, against a real worker process on
 * SQLite. Each attack checks that the server answers the attacker as it should (431, 405, a closed socket), that
 * its resident memory stays bounded, and that a well-behaved scrape answers again once the attack is cut off.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createConnection, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { METRICS_HTTP_LIMITS } from '../src/metrics/http.js';
import { sampleRss } from './fixtures/h2-attack.js';
import { httpRequest, startWithMetrics, type MetricsProcess } from './fixtures/metrics-process.js';
import { waitFor } from './support/wait.js';

const MB = 1024 * 1024;
/** Peak resident memory allowed during an attack, over the process's own before it. */
const MAX_RSS_GROWTH_BYTES = 96 * MB;
/** The server cuts off a stalled header or idle socket within its limit plus this (its check runs every 500 ms). */
const CUTOFF_SLACK_MS = 3_000;

let dir = '';
let server: MetricsProcess;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'kvmq-metrics-http-'));
  server = await startWithMetrics(['work', 'jobs', '--exec', 'true', '--metrics', '127.0.0.1:0'], {
    KVMQ_STORE: `sqlite:${join(dir, 'kvmq.db')}`,
  });
});

after(async () => {
  await server.stop();
  await rm(dir, { recursive: true, force: true });
});

/** A raw connection: what it received, and when the server closed it. */
function rawConnection(port: number): { socket: Socket; received: () => string; closed: Promise<number> } {
  const socket = createConnection({ host: '127.0.0.1', port });
  let received = '';
  socket.setEncoding('latin1').on('data', (text: string) => (received += text));
  socket.on('error', () => undefined);
  const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now())));
  return { socket, received: () => received, closed };
}

/** Runs `attack` with memory sampled; then a plain scrape must answer. */
async function underAttack(attack: () => Promise<void>): Promise<void> {
  const baseline = sampleRss(server.pid).stop();
  const rss = sampleRss(server.pid, 25);
  try {
    await attack();
  } finally {
    const peak = rss.stop();
    assert.ok(peak - baseline < MAX_RSS_GROWTH_BYTES, `RSS grew ${((peak - baseline) / MB).toFixed(0)} MB`);
  }
  const answer = await waitFor(() => httpRequest(server.url).catch(() => null), {
    timeoutMs: 15_000,
    what: 'a scrape after the attack',
  });
  assert.equal(answer.status, 200);
}

describe('kvmq work --metrics: the exposition server', () => {
  test('answers GET and HEAD /metrics, 404 elsewhere, 405 for other methods', async () => {
    const get = await httpRequest(server.url);
    assert.equal(get.status, 200);
    assert.match(String(get.headers['content-type']), /^text\/plain; version=0\.0\.4/);
    assert.match(get.body, /^# TYPE kvmq_messages_handled_total counter$/m);
    assert.match(get.body, /^kvmq_queue_messages\{queue="jobs",state="queued"\} 0$/m);
    const head = await httpRequest(server.url, 'HEAD');
    assert.equal(head.status, 200);
    assert.equal(head.body, '');
    assert.ok(Number(head.headers['content-length']) > 0);
    assert.equal((await httpRequest(`${server.url}?name[]=x`)).status, 200);
    for (const path of ['/', '/metrics/', '/metricsx', '/favicon.ico']) {
      assert.equal((await httpRequest(new URL(path, server.url).href)).status, 404, path);
    }
    for (const method of ['POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH']) {
      const answer = await httpRequest(server.url, method);
      assert.equal(answer.status, 405, method);
      assert.equal(answer.headers.allow, 'GET, HEAD');
    }
  });

  test('request headers over the limit get 431, and the server goes on', async () => {
    await underAttack(async () => {
      const raw = rawConnection(server.port);
      raw.socket.write(`GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(64 * 1024)}\r\n\r\n`);
      await raw.closed;
      assert.match(raw.received(), /^HTTP\/1\.1 431 /);
    });
  });

  test('a request body is never read: the answer comes, then the connection closes', async () => {
    await underAttack(async () => {
      const raw = rawConnection(server.port);
      raw.socket.write('POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 1073741824\r\n\r\n');
      const chunk = Buffer.alloc(64 * 1024, 1);
      let sent = 0;
      // Keeps sending until the server hangs up; a server that read the body would take the whole gigabyte.
      while (!raw.socket.destroyed && sent < 256 * MB) {
        if (!raw.socket.write(chunk))
          await new Promise((resolve) => raw.socket.once('drain', resolve).once('close', resolve));
        sent += chunk.length;
      }
      assert.ok(raw.socket.destroyed, `the server was still reading after ${sent / MB} MB`);
      assert.match(raw.received(), /^HTTP\/1\.1 405 /);
    });
  });

  test('headers sent a byte at a time (slowloris) are cut off at the headers timeout', async () => {
    await underAttack(async () => {
      const request = 'GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ' + 'a'.repeat(1000) + '\r\n\r\n';
      const raws = Array.from({ length: 50 }, () => rawConnection(server.port));
      const started = Date.now();
      let i = 0;
      const drip = setInterval(() => {
        for (const raw of raws) if (!raw.socket.destroyed) raw.socket.write(request.charAt(i));
        i += 1;
      }, 200);
      try {
        const closedAt = await Promise.all(raws.map((raw) => raw.closed));
        const slowest = Math.max(...closedAt) - started;
        assert.ok(slowest < METRICS_HTTP_LIMITS.headersTimeoutMs + CUTOFF_SLACK_MS, `last cut off after ${slowest} ms`);
        assert.ok(i < request.length, 'a request was completed');
      } finally {
        clearInterval(drip);
      }
    });
  });

  test('a flood of idle connections is capped, then timed out', async () => {
    await underAttack(async () => {
      const started = Date.now();
      const raws = Array.from({ length: 1000 }, () => rawConnection(server.port));
      const closedAt = await Promise.all(raws.map((raw) => raw.closed));
      const slowest = Math.max(...closedAt) - started;
      const refusedAtOnce = closedAt.filter((at) => at - started < METRICS_HTTP_LIMITS.headersTimeoutMs / 2).length;
      assert.ok(
        refusedAtOnce >= 1000 - METRICS_HTTP_LIMITS.maxConnections,
        `only ${refusedAtOnce} connections over the cap were refused`,
      );
      assert.ok(slowest < METRICS_HTTP_LIMITS.headersTimeoutMs + CUTOFF_SLACK_MS, `last cut off after ${slowest} ms`);
    });
  });

  test('a client that sends many requests and never reads is bounded and dropped', async () => {
    const requests = 20_000;
    let received = 0;
    await underAttack(async () => {
      const raw = rawConnection(server.port);
      raw.socket.pause();
      raw.socket.write('GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(requests));
      // Meanwhile another client scrapes as usual.
      assert.equal((await httpRequest(server.url)).status, 200);
      // Not reading is the attack: it lasts past the idle limit, then the client reads what the server left it.
      await delay(METRICS_HTTP_LIMITS.idleTimeoutMs + CUTOFF_SLACK_MS);
      raw.socket.removeAllListeners('data');
      raw.socket.on('data', (chunk: string) => (received += chunk.length));
      raw.socket.resume();
      await raw.closed;
    });
    const answer = await httpRequest(server.url);
    const full = requests * answer.body.length;
    assert.ok(received < full / 10, `the server wrote ${received} of ${full} bytes to a client that did not read`);
  });
});

describe('kvmq work --metrics: the address', () => {
  const cli = fileURLToPath(new URL('../src/cli/main.ts', import.meta.url));
  const work = (address: string): { status: number | null; stderr: string } =>
    spawnSync(process.execPath, ['--import', 'tsx', cli, 'work', 'jobs', '--exec', 'true', '--metrics', address], {
      env: { ...process.env, KVMQ_STORE: `sqlite:${join(dir, 'address.db')}` },
      encoding: 'utf8',
      timeout: 30_000,
    });

  test('a port in use exits 2 with a message naming --metrics', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = taken.address() as { port: number };
      const result = work(`127.0.0.1:${port}`);
      assert.equal(result.status, 2, result.stderr);
      assert.match(
        result.stderr,
        new RegExp(`cannot serve metrics on 127\\.0\\.0\\.1:${port}: the address is in use; choose another --metrics`),
      );
    } finally {
      taken.close();
    }
  });

  test('a malformed address exits 2 and shows the form', () => {
    const result = work('localhost:http');
    assert.equal(result.status, 2);
    assert.match(result.stderr, /--metrics "localhost:http" is not HOST:PORT; use e\.g\. 127\.0\.0\.1:9464/);
  });
});
