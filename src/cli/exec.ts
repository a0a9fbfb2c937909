/** Runs one shell command per message for `kvmq work`: payload on stdin, stdout passed through, stderr kept. */
import { spawn } from 'node:child_process';

export interface ShellResult {
  /** The exit code, or null when a signal ended the command. */
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** The end of what the command wrote to stderr, for the message's last error. */
  readonly stderrTail: string;
  /** With `keepStdout`: what it wrote to stdout, up to the limit + 1 bytes; else null. */
  readonly stdout: Buffer | null;
  /** With `keepStdout`: how many bytes it wrote to stdout in all. */
  readonly stdoutBytes: number;
}

/** What becomes of a command's stdout. */
export interface StdoutHandling {
  /** Keep up to this many bytes of it (one more, to tell it went over); none kept when absent. */
  readonly keep?: number;
  /** Pass it through to kvmq's stdout. @defaultValue true */
  readonly passThrough?: boolean;
}

/** How much of a command's stderr is kept: enough to see why it failed, small enough for any store. */
export const STDERR_TAIL_BYTES = 4096;
// After a SIGTERM, a command that has not exited by then gets SIGKILL.
const KILL_GRACE_MS = 5000;

/**
 * `sh -c command` with `input` on its stdin. Aborting `signal` ends the
 * command (SIGTERM, then SIGKILL); the promise still resolves with how it ended.
 */
export function runShell(
  command: string,
  input: Uint8Array,
  env: NodeJS.ProcessEnv,
  signal: AbortSignal,
  { keep, passThrough = true }: StdoutHandling = {},
): Promise<ShellResult> {
  const keepStdout = keep !== undefined;
  const limit = keep ?? 0;
  return new Promise((resolve, reject) => {
    // A process group of its own: a Ctrl-C meant for kvmq (a graceful stop) lets running commands finish,
    // and ending the command also ends whatever it started.
    const stdoutMode = keepStdout || !passThrough ? 'pipe' : 'inherit';
    const child = spawn('sh', ['-c', command], { env, stdio: ['pipe', stdoutMode, 'pipe'], detached: true });
    let tail = Buffer.alloc(0);
    const kept: Buffer[] = [];
    let stdoutBytes = 0;
    // Still passed through; kept up to one byte past the limit, which is enough to refuse it.
    child.stdout?.on('data', (chunk: Buffer) => {
      if (passThrough) process.stdout.write(chunk);
      if (keepStdout && stdoutBytes <= limit) kept.push(chunk);
      stdoutBytes += chunk.length;
    });
    let killTimer: NodeJS.Timeout | null = null;

    const end = (how: NodeJS.Signals): void => {
      if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
      try {
        process.kill(-child.pid, how);
      } catch {
        // Already gone.
      }
    };
    const onAbort = (): void => {
      end('SIGTERM');
      killTimer = setTimeout(() => end('SIGKILL'), KILL_GRACE_MS);
    };
    const cleanUp = (): void => {
      signal.removeEventListener('abort', onAbort);
      if (killTimer !== null) clearTimeout(killTimer);
    };

    child.stderr?.on('data', (chunk: Buffer) => {
      process.stderr.write(chunk);
      tail = Buffer.concat([tail, chunk]);
      if (tail.length > STDERR_TAIL_BYTES) tail = Buffer.from(tail.subarray(tail.length - STDERR_TAIL_BYTES));
    });
    // A command need not read its input; writing to it then fails with EPIPE, which is no error of ours.
    child.stdin?.on('error', () => undefined);
    child.stdin?.end(input);
    child.on('error', (error) => {
      cleanUp();
      reject(error);
    });
    child.on('close', (code, endedBy) => {
      cleanUp();
      const stdout = keepStdout ? Buffer.concat(kept).subarray(0, limit + 1) : null;
      resolve({ code, signal: endedBy, stderrTail: tail.toString('utf8'), stdout, stdoutBytes });
    });
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
}
