/** Fixture scripts run as separate processes (crash tests, cross-process wake-ups), read line by line. */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { waitFor } from './wait.js';

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface Exit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export interface Child {
  readonly pid: number;
  /** What it wrote to stderr so far. */
  readonly stderr: string;
  /** Resolves when the process has exited. */
  readonly exited: Promise<Exit>;
  /** Waits for a stdout line matching `pattern`; fails early if the process exits first. */
  line(pattern: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
  /** Signals the process (if alive) and waits for it to exit. */
  kill(signal: NodeJS.Signals): Promise<Exit>;
}

/** Runs `test/fixtures/<script>` with tsx, as the tests themselves run. */
export function spawnChild(script: string, args: readonly string[]): Child {
  const file = fileURLToPath(new URL(`../fixtures/${script}`, import.meta.url));
  const proc = spawn(process.execPath, ['--import', 'tsx', file, ...args], {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  let stderr = '';
  let exit: Exit | null = null;
  createInterface({ input: proc.stdout }).on('line', (line) => lines.push(line));
  proc.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<Exit>((resolve) => {
    proc.on('exit', (code, signal) => {
      exit = { code, signal };
      resolve(exit);
    });
  });
  if (proc.pid === undefined) throw new Error(`could not start ${script}`);
  const pid = proc.pid;

  return {
    pid,
    get stderr() {
      return stderr;
    },
    exited,
    async line(pattern, timeoutMs = 15_000) {
      return waitFor(
        () => {
          for (const line of lines) {
            const match = pattern.exec(line);
            if (match !== null) return match;
          }
          if (exit !== null) {
            throw new Error(
              `${script} exited (${JSON.stringify(exit)}) before printing ${pattern}; stderr:\n${stderr}`,
            );
          }
          return null;
        },
        {
          timeoutMs,
          what: () => `${script} to print ${pattern} (stdout: ${JSON.stringify(lines)}, stderr: ${stderr})`,
        },
      );
    },
    async kill(signal) {
      if (exit === null) proc.kill(signal);
      return exited;
    },
  };
}
