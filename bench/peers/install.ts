/**
 * The peer queues kvmq is measured against live in their own package
 * (bench/peers/package.json), installed on demand here so they never become
 * kvmq's dependencies. They are loaded with require, typed by the small
 * interfaces each bench declares for what it uses.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const DIR = fileURLToPath(new URL('.', import.meta.url));

/** Installs bench/peers' packages if any is missing, then returns a require that resolves from there. */
export function peerRequire(packages: readonly string[]): NodeJS.Require {
  const missing = packages.filter(
    (name) => !existsSync(new URL(`./node_modules/${name}/package.json`, import.meta.url)),
  );
  if (missing.length > 0) {
    process.stderr.write(`bench: installing ${missing.join(', ')} into bench/peers (npm install)\n`);
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
    const run = spawnSync(npm, ['install', '--no-audit', '--no-fund', '--loglevel=error'], {
      cwd: DIR,
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    if (run.status !== 0)
      throw new Error(`npm install in bench/peers failed (exit ${run.status ?? run.signal ?? '?'})`);
  }
  return createRequire(new URL('./package.json', import.meta.url));
}
