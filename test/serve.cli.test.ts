/**
 * `kvmq serve` as a user runs it: it prints its endpoint and an etcdctl line,
 * serves etcdctl, stops cleanly on SIGINT (exit 0) keeping its data, and
 * refuses a bad command line or data directory (a file, or one another
 * server is using) with a message.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { after, describe, test } from 'node:test';
import { etcdctl } from './fixtures/serve-support.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const MAIN = join(ROOT, 'src/cli/main.ts');

function kvmq(args: string[]): { code: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, ['--import', 'tsx', MAIN, ...args], { cwd: ROOT, encoding: 'utf8' });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe('kvmq serve on the command line', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kvmq-serve-cli-'));

  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  test('prints its endpoint, serves etcdctl, and stops on SIGINT keeping its data', { timeout: 60_000 }, async () => {
    const data = join(dir, 'data');
    const start = (): {
      child: ReturnType<typeof spawn>;
      lines: Promise<string[]>;
      exited: Promise<number | null>;
    } => {
      const child = spawn(
        process.execPath,
        ['--import', 'tsx', MAIN, 'serve', '--data', data, '--listen', '127.0.0.1:0'],
        {
          cwd: ROOT,
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      const collected: string[] = [];
      const lines = new Promise<string[]>((resolve) => {
        const rl = createInterface({ input: child.stdout as NodeJS.ReadableStream });
        rl.on('line', (line) => {
          collected.push(line);
          if (collected.length === 2) resolve(collected);
        });
      });
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      return { child, lines, exited };
    };
    const first = start();
    const [banner = '', hint = ''] = await first.lines;
    const endpoint = /etcd v3 API on http:\/\/(\S+) \(data in /.exec(banner)?.[1];
    assert.ok(endpoint !== undefined, banner);
    assert.match(hint, new RegExp(`try: export ETCDCTL_API=3 ETCDCTL_ENDPOINTS=${endpoint.replaceAll('.', '\\.')}$`));
    assert.equal((await etcdctl(endpoint, ['put', 'cli-key', 'cli-value'])).stdout.trim(), 'OK');
    // One server per data directory.
    const twice = kvmq(['serve', '--data', data, '--listen', '127.0.0.1:0']);
    assert.equal(twice.code, 1);
    assert.match(twice.stderr, /is in use by another kvmq serve; give each server its own --data directory/);
    first.child.kill('SIGINT');
    assert.equal(await first.exited, 0);

    const second = start();
    const [again = ''] = await second.lines;
    const endpoint2 = /http:\/\/(\S+) /.exec(again)?.[1] ?? '';
    assert.equal((await etcdctl(endpoint2, ['get', 'cli-key', '--print-value-only'])).stdout.trim(), 'cli-value');
    second.child.kill('SIGTERM');
    assert.equal(await second.exited, 0);
  });

  test('a bad command line or data directory is refused with what to do', () => {
    const store = kvmq(['serve', '--store', 'sqlite:x.db']);
    assert.equal(store.code, 2);
    assert.match(store.stderr, /kvmq serve is itself the store: give --data DIR/);
    const listen = kvmq(['serve', '--data', join(dir, 'x'), '--listen', 'nonsense']);
    assert.equal(listen.code, 1);
    assert.match(listen.stderr, /is not HOST:PORT; use e\.g\. 127\.0\.0\.1:2379/);
    const file = join(dir, 'a-file');
    writeFileSync(file, 'not a directory');
    const data = kvmq(['serve', '--data', file, '--listen', '127.0.0.1:0']);
    assert.equal(data.code, 1);
    assert.match(data.stderr, /cannot open the data directory .*is a file, not a directory/);
    const retention = kvmq(['serve', '--data', join(dir, 'y'), '--auto-compaction-retention', 'soon']);
    assert.equal(retention.code, 2);
    assert.match(retention.stderr, /--auto-compaction-retention must look like 1h/);
  });
});
