/**
 * `kvmq serve` with TLS, as etcd is run with it: --cert-file, --key-file, --trusted-ca-file and
 * --client-cert-auth, with a CA, a server and a client certificate made by openssl for the test. etcdctl,
 * the npm etcd3 client and kvmq's own etcds:// store work with the client certificate; a client without
 * one is refused, and a plaintext client on the TLS port fails at once.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect as connectHttp2 } from 'node:http2';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { Etcd3 } from 'etcd3';
import { connect } from '../src/index.js';
import { etcdctl } from './fixtures/serve-support.js';
import { waitFor } from './support/wait.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const MAIN = join(ROOT, 'src/cli/main.ts');

/** A CA, and a server (SAN IP:127.0.0.1) and a client certificate it signs, as PEM files in `dir`. */
function makeCertificates(dir: string): {
  ca: string;
  cert: string;
  key: string;
  clientCert: string;
  clientKey: string;
} {
  const file = (name: string): string => join(dir, name);
  const openssl = (...args: string[]): void => {
    execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  };
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl('req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '1', '-subj', '/CN=kvmq test CA');
  for (const [name, usage] of [
    ['server', 'serverAuth'],
    ['client', 'clientAuth'],
  ] as const) {
    openssl('req', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=kvmq test ${name}`);
    writeFileSync(file(`${name}.ext`), `subjectAltName=IP:127.0.0.1\nextendedKeyUsage=${usage}\n`);
    openssl(
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-days',
      '1',
      '-extfile',
      `${name}.ext`,
      '-out',
      `${name}.pem`,
    );
  }
  return {
    ca: file('ca.pem'),
    cert: file('server.pem'),
    key: file('server.key'),
    clientCert: file('client.pem'),
    clientKey: file('client.key'),
  };
}

describe('kvmq serve over TLS with client certificates', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kvmq-serve-tls-'));
  const pem = makeCertificates(dir);
  let child: ReturnType<typeof spawn>;
  let url = '';

  before(async () => {
    child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        MAIN,
        'serve',
        '--json',
        '--data',
        join(dir, 'data'),
        '--listen',
        '127.0.0.1:0',
        '--cert-file',
        pem.cert,
        '--key-file',
        pem.key,
        '--trusted-ca-file',
        pem.ca,
        '--client-cert-auth',
      ],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const line = await new Promise<string>((resolve) => {
      createInterface({ input: child.stdout as NodeJS.ReadableStream }).once('line', resolve);
    });
    url = (JSON.parse(line) as { url: string }).url;
  });

  after(async () => {
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  });

  test('its URL is https://', () => {
    assert.match(url, /^https:\/\/127\.0\.0\.1:\d+$/);
  });

  test(
    'etcdctl with the client certificate puts and gets; without one it is refused',
    { timeout: 30_000 },
    async () => {
      const tls = ['--cacert', pem.ca, '--cert', pem.clientCert, '--key', pem.clientKey];
      const put = await etcdctl(url, [...tls, 'put', 'tls-key', 'tls-value']);
      assert.equal(put.stdout.trim(), 'OK', put.stderr);
      const get = await etcdctl(url, [...tls, 'get', 'tls-key', '--print-value-only']);
      assert.equal(get.stdout.trim(), 'tls-value', get.stderr);
      const anonymous = await etcdctl(url, ['--cacert', pem.ca, '--command-timeout=3s', 'get', 'tls-key']);
      assert.notEqual(anonymous.code, 0);
    },
  );

  test('the npm etcd3 client with a client certificate writes and reads over TLS', { timeout: 30_000 }, async () => {
    const client = new Etcd3({
      hosts: url,
      credentials: {
        rootCertificate: readFileSync(pem.ca),
        certChain: readFileSync(pem.clientCert),
        privateKey: readFileSync(pem.clientKey),
      },
    });
    try {
      await client.put('etcd3-tls').value('yes');
      assert.equal(await client.get('etcd3-tls').string(), 'yes');
    } finally {
      client.close();
    }
  });

  test("kvmq's etcds:// store enqueues and works through it", { timeout: 60_000 }, async () => {
    const host = url.slice('https://'.length);
    const store = `etcds://${host}?ca=${pem.ca}&cert=${pem.clientCert}&key=${pem.clientKey}`;
    const client = await connect(store, { maintenance: false });
    const handled: unknown[] = [];
    try {
      const worker = client.worker('tls-jobs', (job) => {
        handled.push(job.payload);
      });
      await client.enqueue('tls-jobs', { n: 1 });
      await waitFor(() => handled.length >= 1, { timeoutMs: 20_000, what: 'the job over TLS' });
      await worker.stop();
      assert.deepEqual(handled, [{ n: 1 }]);
    } finally {
      await client.close();
    }
  });

  test('a plaintext HTTP/2 client on the TLS port fails at once', { timeout: 30_000 }, async () => {
    const started = performance.now();
    const session = connectHttp2(url.replace('https:', 'http:'));
    const outcome = await new Promise<string>((resolve) => {
      session.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
      session.once('close', () => resolve('closed'));
      session.request({ ':path': '/etcdserverpb.KV/Range', 'content-type': 'application/grpc' }).on('error', () => {
        // The session reports it.
      });
    });
    session.destroy();
    const ms = performance.now() - started;
    assert.ok(ms < 3000, `took ${ms} ms`);
    assert.notEqual(outcome, '');
  });
});
