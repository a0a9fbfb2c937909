/**
 * What the `kvmq` CLI loads to start: `--version` and help load no command, no store, no server; a command
 * loads its own module and the store its URL names, nothing heavy it does not use. Checked by the modules
 * the process loaded (a load hook logs them), never by timing: bench/cli-start.ts times it.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { COMMANDS } from '../src/cli/cli.js';
import { ROOT } from './support/cli.js';

const run = promisify(execFile);

/** Loaded by no command that does not use it: store drivers, servers, metrics, tracing, the library as a whole. */
const HEAVY: readonly RegExp[] = [
  /\/node_modules\/better-sqlite3\//,
  /\/node_modules\/ioredis\//,
  /\/node_modules\/etcd3\//,
  /\/node_modules\/node-zookeeper-client\//,
  /\/node_modules\/prom-client\//,
  /\/node_modules\/protobufjs\//,
  /\/node_modules\/croner\//,
  /\/node_modules\/@opentelemetry\//,
  /\/src\/index\.ts$/,
  /\/src\/client\.ts$/,
  /\/src\/worker\//,
  // metrics/http.ts, the --metrics address and its server on node:http, is light: prom-client is what weighs.
  /\/src\/metrics\/(?!http\.ts$)/,
  /\/src\/dashboard\//,
  /\/src\/serve\//,
  /\/src\/(sqlite|redis|etcd|zookeeper)\//,
];

let dir = '';
let logs = 0;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'kvmq-cli-start-'));
});

after(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Runs the CLI (exit 0 expected) and returns the project's and packages' modules it loaded, as paths. */
async function modulesLoadedBy(args: readonly string[]): Promise<string[]> {
  logs += 1;
  const log = join(dir, `modules-${logs}.log`);
  await run(
    process.execPath,
    ['--import', 'tsx', '--import', './test/fixtures/module-log.ts', 'src/cli/main.ts', ...args],
    { cwd: ROOT, env: { ...process.env, KVMQ_MODULE_LOG: log, KVMQ_STORE: `sqlite:${join(dir, 'unused.db')}` } },
  );
  const urls = (await readFile(log, 'utf8')).split('\n').filter((url) => url.startsWith('file:'));
  return urls.map((url) => new URL(url).pathname);
}

function heavyAmong(paths: readonly string[], allowed: readonly RegExp[] = []): string[] {
  return paths.filter((path) => HEAVY.some((heavy) => heavy.test(path)) && !allowed.some((ok) => ok.test(path)));
}

describe('kvmq CLI start-up', { concurrency: 2 }, () => {
  it('--version loads no command and nothing heavy', async () => {
    const loaded = await modulesLoadedBy(['--version']);
    assert.ok(
      loaded.some((path) => path.endsWith('/src/cli/main.ts')),
      'the log holds the CLI itself',
    );
    assert.deepEqual(heavyAmong(loaded), []);
    assert.deepEqual(
      loaded.filter((path) => path.includes('/src/cli/commands/')),
      [],
    );
  });

  it("--help and a command's --help load nothing heavy", async () => {
    assert.deepEqual(heavyAmong(await modulesLoadedBy(['--help'])), []);
    const statusHelp = await modulesLoadedBy(['status', '--help']);
    assert.deepEqual(heavyAmong(statusHelp), []);
    assert.deepEqual(
      statusHelp.filter((path) => path.includes('/src/cli/commands/')).map((path) => path.replace(/.*\//, '')),
      ['status.ts'],
    );
  });

  it('status on SQLite loads SQLite, and no other store, server, metrics or dashboard', async () => {
    const store = `sqlite:${join(dir, 'status.db')}`;
    // A queue nobody used is refused as unknown: give it a message first.
    await run(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'enqueue', 'jobs', 'hello', '--store', store], {
      cwd: ROOT,
    });
    const loaded = await modulesLoadedBy(['status', 'jobs', '--store', store]);
    assert.ok(
      loaded.some((path) => /\/node_modules\/better-sqlite3\//.test(path)),
      'the log sees the store driver the command uses',
    );
    const needed = [/\/node_modules\/better-sqlite3\//, /\/src\/sqlite\//, /\/src\/client\.ts$/];
    assert.deepEqual(heavyAmong(loaded, needed), []);
  });

  it('names each command as its module does', async () => {
    for (const entry of COMMANDS) assert.equal((await entry.load()).name, entry.name);
  });
});
