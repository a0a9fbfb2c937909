/** What a `kvmq work` command's exit status (and, with --result-stdout, its stdout) makes of an attempt. */
import { expBackoff } from '../model/backoff.js';
import { RESULT_MAX_BYTES } from '../model/result.js';
import type { HandlerResult } from '../index.js';
import type { ShellResult } from './exec.js';

/** sysexits.h's EX_TEMPFAIL: "try again later". */
export const EX_TEMPFAIL = 75;

/** Exit 0 → success, 75 → retry, anything else (or a signal) → error; the stderr tail is the last error. */
export function outcomeOf(result: ShellResult, attempt: number, retryBackoffMs: number | undefined): HandlerResult {
  return result.code === 0 ? successOf(result) : failureOf(result, attempt, retryBackoffMs);
}

/** A command that did not exit 0: 75 → retry, anything else (or a signal) → thrown, its stderr tail the error. */
export function failureOf(result: ShellResult, attempt: number, retryBackoffMs: number | undefined): HandlerResult {
  const tail = result.stderrTail.trimEnd();
  const error = tail === '' ? describe(result) : `${describe(result)}\n${tail}`;
  if (result.code === EX_TEMPFAIL) return { status: 'retry', backoffMs: retryBackoffMs ?? expBackoff(attempt), error };
  // Thrown, so the attempts policy (--max-attempts, or the message's own) decides between a retry and failed.
  throw new CommandFailed(error);
}

/** A success; with --result-stdout, its stdout is the result (over RESULT_MAX_BYTES: the message fails, saying so). */
function successOf(result: ShellResult): HandlerResult {
  if (result.stdout === null) return { status: 'success' };
  if (result.stdoutBytes > RESULT_MAX_BYTES) {
    const error = `command's stdout is ${result.stdoutBytes} bytes, over the result limit of ${RESULT_MAX_BYTES} bytes`;
    return { status: 'error', error };
  }
  return { status: 'success', result: result.stdout };
}

/** A failed command, recorded as its text alone: the stack would only point into kvmq. */
export class CommandFailed extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CommandFailed';
    this.stack = message;
  }
}

export function describe(result: ShellResult): string {
  return result.code === null
    ? `command was killed by ${result.signal ?? 'a signal'}`
    : `command exited with code ${result.code}`;
}
