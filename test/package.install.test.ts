/**
 * The package as a user installs it: the build packed with `npm pack` and installed with npm into a fresh
 * project, which then imports 'kvmq' and 'kvmq/serve' by name through package.json's `exports`. The store
 * drivers are optional peer dependencies, so that install holds none of them: the embedded SQLite default
 * works, another store's URL names the package to install, and once it is installed that store works too.
 *
 * npm installs from its cache when it can (`npm ci` filled it). Install scripts are skipped: better-sqlite3's
 * native build is taken from this checkout when the versions match (else rebuilt), so the test does not spend
 * minutes compiling SQLite.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { redisTestUrl } from './fixtures/redis-server.js';

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '..');
const NPM_FLAGS = ['--ignore-scripts', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'];
const DRIVERS = ['ioredis', 'pg', 'etcd3', 'node-zookeeper-client'];
// Optional peer dependencies too: metrics and tracing.
const OPTIONAL = [...DRIVERS, 'prom-client', '@opentelemetry/api'];

interface ExportTarget {
  readonly types: string;
  readonly default: string;
}

function versionIn(modules: string, name: string): string {
  return (JSON.parse(readFileSync(join(modules, name, 'package.json'), 'utf8')) as { version: string }).version;
}

/** Runs a module script in the user's project; its stdout. */
async function inProject(dir: string, script: string): Promise<string> {
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: dir });
  return stdout;
}

describe('the package as installed', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kvmq-package-'));
  const packed = join(dir, 'pack');
  const app = join(dir, 'app');
  const modules = join(app, 'node_modules');
  const installed = join(modules, 'kvmq');
  const dist = join(installed, 'dist');

  before(async () => {
    // The build of this checkout, laid out as the package's `files` list it, then packed and installed.
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { files: string[] };
    mkdirSync(packed, { recursive: true });
    const tsc = join(ROOT, 'node_modules/typescript/bin/tsc');
    await run(process.execPath, [tsc, '-p', 'tsconfig.build.json', '--outDir', join(packed, 'dist')], { cwd: ROOT });
    await run(process.execPath, ['scripts/proto.mjs', '--copy-to', join(packed, 'dist/serve/proto/generated')], {
      cwd: ROOT,
    });
    for (const entry of ['package.json', ...pkg.files.filter((f) => f !== 'dist')]) {
      cpSync(join(ROOT, entry), join(packed, entry), { recursive: true });
    }
    const { stdout } = await run('npm', ['pack', '--ignore-scripts', '--loglevel=error', '--pack-destination', dir], {
      cwd: packed,
    });
    const tarball = join(dir, stdout.trim().split('\n').pop() ?? '');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
    await run('npm', ['install', ...NPM_FLAGS, tarball], { cwd: app });
    const sqlite = join(modules, 'better-sqlite3');
    if (versionIn(modules, 'better-sqlite3') === versionIn(join(ROOT, 'node_modules'), 'better-sqlite3')) {
      cpSync(
        join(ROOT, 'node_modules/better-sqlite3/build/Release/better_sqlite3.node'),
        join(sqlite, 'build/Release/better_sqlite3.node'),
      );
    } else {
      await run('npm', ['rebuild', 'better-sqlite3'], { cwd: app });
    }
  });

  after(() => rmSync(dir, { recursive: true, force: true }));

  test("every entry in package.json's exports points at a built file, types and code", () => {
    const pkg = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as {
      exports: Record<string, ExportTarget | string>;
    };
    assert.ok('./serve' in pkg.exports, 'kvmq/serve is not exported');
    for (const [entry, target] of Object.entries(pkg.exports)) {
      const files = typeof target === 'string' ? [target] : [target.types, target.default];
      for (const file of files) assert.ok(existsSync(join(installed, file)), `${entry}: ${file} was not built`);
    }
  });

  test("'kvmq/serve' imports by name, starts a server and stops it without writing to the console", async () => {
    const script = `
      const { startServer, ServeError } = await import('kvmq/serve');
      const { KvmqError } = await import('kvmq');
      if (!(new ServeError('m') instanceof KvmqError)) throw new Error('ServeError is not a KvmqError');
      const server = await startServer({ dataDir: ${JSON.stringify(join(dir, 'data'))}, listen: '127.0.0.1:0' });
      await server.close();
      process.stdout.write('served on ' + server.url);
    `;
    const { stdout, stderr } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: app });
    assert.match(stdout, /^served on http:\/\/127\.0\.0\.1:\d+$/);
    assert.equal(stderr, '');
  });

  test("a user's TypeScript cannot reach a client's store or construct a Client, Worker or Queue itself", async () => {
    const declarations = readFileSync(join(dist, 'client/client.d.ts'), 'utf8');
    assert.doesNotMatch(declarations, /\bStore\b|^\s*(readonly\s+)?store\b/m, 'client.d.ts names the store');
    // Each @ts-expect-error fails the compile (TS2578) once the line it covers stops being an error.
    writeFileSync(
      join(app, 'user.mts'),
      [
        "import { Client, Queue, Worker, connect } from 'kvmq';",
        "const client = await connect('sqlite:./user.db');",
        '// @ts-expect-error the store is not public',
        'void client.store;',
        '// @ts-expect-error the constructor is private',
        'void new Client();',
        '// @ts-expect-error the constructor is private: client.worker() makes workers',
        'void new Worker();',
        '// @ts-expect-error the constructor is private: client.queue() makes typed queues',
        'void new Queue();',
        "const worker = client.worker('q', () => undefined, { autoStart: false });",
        '// @ts-expect-error internal members are not declared',
        'void worker.instruments;',
        'await client.close();',
      ].join('\n'),
    );
    const tsc = join(ROOT, 'node_modules/typescript/bin/tsc');
    const flags = ['--noEmit', '--strict', '--module', 'nodenext', '--target', 'es2022', '--skipLibCheck'];
    await run(process.execPath, [tsc, ...flags, '--typeRoots', join(ROOT, 'node_modules/@types'), 'user.mts'], {
      cwd: app,
    });
  });

  test('no optional package is installed with it, and the embedded SQLite default works', async () => {
    for (const name of OPTIONAL) assert.equal(existsSync(join(modules, name)), false, `${name} was installed`);
    const db = join(dir, 'default.db');
    const stdout = await inProject(
      app,
      `
      const { connect } = await import('kvmq');
      const client = await connect(${JSON.stringify(`sqlite:${db}`)});
      await client.enqueue('mail', { to: 'a@example.com' }, { id: 'm1' });
      const handled = await new Promise((resolve) => {
        const worker = client.worker('mail', async (job) => {
          resolve(job.payload.to);
          return { status: 'success', result: 'sent' };
        });
        void worker;
      });
      const done = await client.waitFor('mail', 'm1', { timeoutMs: 10000 });
      const metrics = await client.metrics().then(() => 'served', (error) => error.code + ' ' + error.package);
      await client.close();
      process.stdout.write(JSON.stringify({ handled, outcome: done.outcome, result: done.result, metrics }));
    `,
    );
    assert.deepEqual(JSON.parse(stdout), {
      handled: 'a@example.com',
      outcome: 'completed',
      result: 'sent',
      metrics: 'PACKAGE_MISSING prom-client',
    });
  });

  test("another store's URL names the driver to install, from the API and the command line", async () => {
    const urls = {
      ioredis: 'redis://127.0.0.1:1',
      pg: 'postgres://127.0.0.1:1/db',
      etcd3: 'etcd://127.0.0.1:1',
      'node-zookeeper-client': 'zookeeper://127.0.0.1:1/kvmq',
    };
    const stdout = await inProject(
      app,
      `
      const { connect } = await import('kvmq');
      const seen = {};
      for (const [driver, url] of Object.entries(${JSON.stringify(urls)})) {
        try {
          await connect(url);
          seen[driver] = 'connected';
        } catch (error) {
          seen[driver] = { name: error.name, code: error.code, package: error.package, message: error.message };
        }
      }
      process.stdout.write(JSON.stringify(seen));
    `,
    );
    type Seen = { name: string; code: string; package: string; message: string } | undefined;
    const seen = JSON.parse(stdout) as Record<string, Seen>;
    for (const driver of Object.keys(urls)) {
      const error = seen[driver];
      assert.equal(error?.name, 'PackageMissingError', JSON.stringify(error));
      assert.equal(error.code, 'PACKAGE_MISSING');
      assert.equal(error.package, driver);
      assert.match(error.message, new RegExp(`npm install ${driver}`));
    }
    const cli = join(dist, 'cli/main.js');
    const refused = await run(process.execPath, [cli, 'status', 'q', '--store', urls.ioredis], { cwd: app }).then(
      () => null,
      (error: unknown) => error as { code: number; stdout: string; stderr: string },
    );
    assert.ok(refused !== null, 'kvmq status on redis:// without ioredis succeeded');
    assert.notEqual(refused.code, 0);
    assert.equal(refused.stdout, '');
    assert.match(refused.stderr, /npm install ioredis/);
    assert.doesNotMatch(refused.stderr, /\n\s+at /, 'a stack trace was printed');
  });

  test('once its driver is installed, that store works', async () => {
    const version = versionIn(join(ROOT, 'node_modules'), 'ioredis');
    await run('npm', ['install', ...NPM_FLAGS, `ioredis@${version}`], { cwd: app });
    const prefix = `kvmqpkg${process.pid}`;
    const url = `${redisTestUrl()}?prefix=${prefix}`;
    const stdout = await inProject(
      app,
      `
      const { connect } = await import('kvmq');
      const client = await connect(${JSON.stringify(url)});
      await client.enqueue('q', 'hello', { id: 'r1' });
      const status = await client.status('q', 'r1');
      await client.clear('q');
      await client.close();
      process.stdout.write(status.state);
    `,
    );
    assert.equal(stdout, 'queued');
    assert.deepEqual(
      readdirSync(modules).filter((name) => DRIVERS.includes(name)),
      ['ioredis'],
    );
  });
});
