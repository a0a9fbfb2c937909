/**
 * The installed package, as a user imports it: the build is laid out as node_modules/kvmq in a temp dir
 * (its dependencies linked from this checkout, so no network), and a script there imports 'kvmq' and
 * 'kvmq/serve' by name through package.json's `exports`.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '..');

interface ExportTarget {
  readonly types: string;
  readonly default: string;
}

describe('the package as installed', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kvmq-package-'));
  const installed = join(dir, 'node_modules', 'kvmq');
  const dist = join(installed, 'dist');

  before(async () => {
    mkdirSync(installed, { recursive: true });
    copyFileSync(join(ROOT, 'package.json'), join(installed, 'package.json'));
    symlinkSync(join(ROOT, 'node_modules'), join(installed, 'node_modules'), 'dir');
    await run(
      process.execPath,
      [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json', '--outDir', dist],
      {
        cwd: ROOT,
      },
    );
    await run(process.execPath, ['scripts/proto.mjs', '--copy-to', join(dist, 'serve/proto/generated')], { cwd: ROOT });
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
    const { stdout, stderr } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: dir });
    assert.match(stdout, /^served on http:\/\/127\.0\.0\.1:\d+$/);
    assert.equal(stderr, '');
  });

  test("a user's TypeScript cannot reach a client's store or construct a Client without connect()", async () => {
    const declarations = readFileSync(join(dist, 'client.d.ts'), 'utf8');
    assert.doesNotMatch(declarations, /\bStore\b|^\s*(readonly\s+)?store\b/m, 'client.d.ts names the store');
    // Each @ts-expect-error fails the compile (TS2578) once the line it covers stops being an error.
    writeFileSync(
      join(dir, 'user.mts'),
      [
        "import { Client, connect } from 'kvmq';",
        "const client = await connect('sqlite:./user.db');",
        '// @ts-expect-error the store is not public',
        'void client.store;',
        '// @ts-expect-error the constructor is private',
        'void new Client();',
        'await client.close();',
      ].join('\n'),
    );
    const tsc = join(ROOT, 'node_modules/typescript/bin/tsc');
    const flags = ['--noEmit', '--strict', '--module', 'nodenext', '--target', 'es2022', '--skipLibCheck'];
    await run(process.execPath, [tsc, ...flags, '--typeRoots', join(ROOT, 'node_modules/@types'), 'user.mts'], {
      cwd: dir,
    });
  });
});
