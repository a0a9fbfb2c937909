/** Smoke runs of bench scripts: a script under tsx from the repository's root, its output collected whole. */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface ScriptRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `script` (a path from the root, e.g. 'bench/run.ts') with `args`; resolves when it exits. */
export function runScript(script: string, args: readonly string[]): Promise<ScriptRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], { cwd: ROOT });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (text: string) => (stdout += text));
    child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** SQLite store URLs for the benches, by file name, in a temp dir removed when the test file's tests end. */
export function benchSqliteUrls(label: string): (file: string) => string {
  const dir = mkdtempSync(join(tmpdir(), `kvmq-${label}-`));
  after(() => rmSync(dir, { recursive: true, force: true }));
  return (file) => `sqlite:${join(dir, file)}`;
}
