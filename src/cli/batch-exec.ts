/**
 * `kvmq work --batch`: the JSON array of messages a command reads on its stdin, and what its exit status and
 * stdout make of their outcomes (docs/cli.md, Batches).
 */
import { payloadBytes } from '../model/payload.js';
import { RESULT_MAX_BYTES } from '../model/result.js';
import { CommandFailed, failureOf } from './exec-outcome.js';
import type { BatchOutcome, HandlerResult, Job } from '../index.js';
import type { ShellResult } from './exec.js';

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Room for a result per message and the JSON around it: a command's stdout past this fails its batch. */
export function batchStdoutLimit(messages: number): number {
  return messages * (RESULT_MAX_BYTES + 1024);
}

/** The command's stdin: one object per message, its payload as text (or base64, for bytes that are not UTF-8). */
export function batchInput(jobs: readonly Job[]): Buffer {
  const messages = jobs.map((job) => {
    const bytes = payloadBytes(job.payload);
    const { queue, id, attempt, metadata } = job;
    const text = utf8(bytes);
    return text === null
      ? { queue, id, attempt, metadata, payloadBase64: bytes.toString('base64') }
      : { queue, id, attempt, metadata, payload: text };
  });
  return Buffer.from(JSON.stringify(messages), 'utf8');
}

/**
 * Exit 0 with nothing on stdout: success for all; exit 0 with a JSON array: one outcome per message (`null` a
 * success, an object a handler's `{ status, error?, backoffMs?, result? }`); 75: a retry for each, after its own
 * backoff; anything else, or stdout that is not such an array: thrown, so each message is retried per its
 * attempts.
 */
export function batchOutcomeOf(
  result: ShellResult,
  jobs: readonly Job[],
  retryBackoffMs: number | undefined,
): BatchOutcome {
  if (result.code !== 0) return jobs.map((job) => failureOf(result, job.attempt, retryBackoffMs));
  const stdout = result.stdout ?? Buffer.alloc(0);
  if (result.stdoutBytes > batchStdoutLimit(jobs.length)) {
    throw new CommandFailed(`command's stdout is ${result.stdoutBytes} bytes, over the batch's limit`);
  }
  const text = stdout.toString('utf8').trim();
  if (text === '') return undefined;
  let outcomes: unknown;
  try {
    outcomes = JSON.parse(text);
  } catch {
    throw new CommandFailed(`command's stdout is not JSON: ${text.slice(0, 100)}`);
  }
  if (!Array.isArray(outcomes)) {
    throw new CommandFailed('command exited 0 with stdout that is not a JSON array of one outcome per message');
  }
  // The worker checks each outcome's shape, and the array's length, as for any batch handler.
  return outcomes.map((outcome: unknown) => (outcome === null ? undefined : (outcome as HandlerResult)));
}

/** A signal aborted once every one of `signals` is (with the last one's reason). */
export function allAborted(signals: readonly AbortSignal[]): AbortSignal {
  const controller = new AbortController();
  let left = signals.length;
  for (const signal of signals) {
    const gone = (): void => {
      left -= 1;
      if (left === 0) controller.abort(signal.reason);
    };
    if (signal.aborted) gone();
    else signal.addEventListener('abort', gone, { once: true });
  }
  return controller.signal;
}

function utf8(bytes: Buffer): string | null {
  try {
    return UTF8.decode(bytes);
  } catch {
    return null;
  }
}
