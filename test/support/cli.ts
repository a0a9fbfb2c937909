/**
 * Running the `kvmq` CLI as a subprocess on temporary SQLite files: stdout, stderr and exit codes, as a user
 * or a script sees them; the CLI as built when the build is fresh (as in CI), else the source under tsx.
 * Children still running when the file's tests end are killed.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess, type ChildProcessByStdio } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readdirSync, statSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import type { Readable, Writable } from 'node:stream';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after } from 'node:test';

/** The repository's root, where the CLI's scripts run. */
export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
// Generous: two cores, and a spawn under tsx takes most of a second to start.
const RUN_TIMEOUT_MS = 30_000;

export interface RunResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface RunOptions {
  /** $KVMQ_STORE for the child; every test passes its own file. */
  readonly store: string;
  readonly input?: string | Buffer;
  /** A file the child reads as its stdin instead of `input` (/dev/zero: a stream without end). */
  readonly stdinFrom?: string;
  readonly env?: Readonly<Record<string, string>>;
}

const children = new Set<ChildProcess>();
// Made at import, so a store named while the tests are collected (before any hook runs) lands here too.
const dir = mkdtempSync(join(tmpdir(), 'kvmq-cli-'));
let stores = 0;

after(async () => {
  for (const child of children) child.kill('SIGKILL');
  await rm(dir, { recursive: true, force: true });
});

/** A fresh SQLite store URL in the temp dir. */
export function newStore(): string {
  stores += 1;
  return `sqlite:${join(dir, `store-${stores}.db`)}`;
}

const CLI_SOURCE = 'src/cli/main.ts';
const CLI_BUILT = join(ROOT, 'dist/cli/main.js');

/** The newest modification time of a file under `dir`, in ms. */
function newest(dir: string): number {
  let at = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    at = Math.max(at, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }
  return at;
}

/**
 * Whether the CLI as built (`npm run build`, which CI runs first) is newer than every source file: then a test
 * runs it, as the package does, without tsx, and each spawn starts in about a third of the time.
 */
const builtIsFresh = ((): boolean => {
  try {
    return statSync(CLI_BUILT).mtimeMs >= newest(join(ROOT, 'src'));
  } catch {
    return false;
  }
})();

/** What runs `script`: the CLI as built when it is fresh, else the source under tsx. */
function command(script: string): string[] {
  return script === CLI_SOURCE && builtIsFresh ? [CLI_BUILT] : ['--import', 'tsx', script];
}

/** Starts a script (under tsx, or the CLI as built); `result` settles when it exits (killed after RUN_TIMEOUT_MS). */
export function start(script: string, args: readonly string[], options: RunOptions) {
  const stdin = options.stdinFrom === undefined ? 'pipe' : openSync(options.stdinFrom, 'r');
  const child = spawn(process.execPath, [...command(script), ...args], {
    cwd: ROOT,
    env: { ...process.env, ...options.env, KVMQ_STORE: options.store },
    stdio: [stdin, 'pipe', 'pipe'],
  }) as ChildProcessByStdio<Writable | null, Readable, Readable>;
  if (typeof stdin === 'number') closeSync(stdin);
  children.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (text: string) => (stdout += text));
  child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
  child.stdin?.end(options.input);
  const timer = setTimeout(() => child.kill('SIGKILL'), RUN_TIMEOUT_MS);
  const result = new Promise<RunResult>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      children.delete(child);
      resolve({ code, signal, stdout, stderr });
    });
  });
  return { child, result, stdout: () => stdout, stderr: () => stderr };
}

export function kvmq(args: readonly string[], options: RunOptions): Promise<RunResult> {
  return start(CLI_SOURCE, args, options).result;
}

/** Runs and expects the exit code, showing stderr when it differs. */
export async function expectExit(code: number, args: readonly string[], options: RunOptions): Promise<RunResult> {
  const result = await kvmq(args, options);
  assert.equal(result.code, code, `kvmq ${args.join(' ')} exited ${String(result.code)}; stderr:\n${result.stderr}`);
  return result;
}

/** The temp dir this test file's stores live in. */
export function cliDir(): string {
  return dir;
}

/** Polls a condition on a child's output until it holds. */
export async function waitFor(condition: () => boolean, what: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
