#!/usr/bin/env node
// `npm test`: runs every test file under test/ with Node's test runner.
// Extra arguments are passed to the runner, e.g. `npm test -- test/cli.test.ts`.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

function testFiles(dir) {
  return readdirSync(dir)
    .flatMap((name) => {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) return testFiles(path);
      return name.endsWith('.test.ts') ? [path] : [];
    })
    .sort();
}

const args = process.argv.slice(2);
const files = args.some((a) => a.endsWith('.ts')) ? [] : testFiles('test');
const result = spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-reporter=spec', ...args, ...files], {
  stdio: 'inherit',
});
process.exit(result.status ?? 1);
