#!/usr/bin/env node
// `npm test`: starts the store servers (scripts/servers.mjs; installing them from
// Debian's packages when missing and running as root), runs every test file under
// test/ with Node's test runner, and stops the servers.
// Extra arguments go to the runner, e.g. `npm test -- test/cli.test.ts`.
import { spawn } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { startServers } from './servers.mjs';

function testFiles(dir) {
  return readdirSync(dir)
    .flatMap((name) => {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) return testFiles(path);
      return name.endsWith('.test.ts') ? [path] : [];
    })
    .sort();
}

// A test file that hangs fails after this long instead of holding up the whole run.
const FILE_TIMEOUT_MS = 10 * 60 * 1000;
// A file whose tests have all ended exits, even if a library left a timer behind (a reconnect after a server
// was stopped on purpose): otherwise it waits out FILE_TIMEOUT_MS, as a CI run once did after its last test passed.
const FORCE_EXIT = '--test-force-exit';
// Two test files at once: each mostly waits on a store server or a subprocess, so the run takes about half as
// long on a 2-core machine (Node's default is one file per core but one). KVMQ_TEST_FILES_AT_ONCE sets it.
const FILES_AT_ONCE = Number(process.env.KVMQ_TEST_FILES_AT_ONCE ?? 2);
if (!Number.isInteger(FILES_AT_ONCE) || FILES_AT_ONCE < 1) {
  console.error(
    `KVMQ_TEST_FILES_AT_ONCE must be a whole number of at least 1, not '${process.env.KVMQ_TEST_FILES_AT_ONCE}'`,
  );
  process.exit(2);
}

const args = process.argv.slice(2);
const files = args.some((a) => a.endsWith('.ts')) ? [] : testFiles('test');
const servers = await startServers();
let code = 1;
try {
  const runner = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      '--test',
      FORCE_EXIT,
      `--test-concurrency=${FILES_AT_ONCE}`,
      `--test-timeout=${FILE_TIMEOUT_MS}`,
      '--test-reporter=spec',
      ...args,
      ...files,
    ],
    {
      stdio: 'inherit',
      env: { ...process.env, ...servers.env },
    },
  );
  const forward = (signal) => runner.kill(signal);
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  code = await new Promise((resolve) => runner.once('exit', (c, s) => resolve(c ?? (s ? 1 : 0))));
} finally {
  await servers.stop();
}
process.exit(code);
