import type { AttemptFinish } from '../stores/contract/contract.js';
import { encodeResult } from '../model/result.js';
import type { HandlerResult, Outcome } from '../model/types.js';

const OUTCOMES: ReadonlySet<string> = new Set<Outcome>(['success', 'error', 'retry']);

function isOutcome(status: string): status is Outcome {
  return OUTCOMES.has(status);
}

/**
 * Turns what a handler returned into a finish; anything malformed is an `error` that says why. Only
 * `{ status: 'success', result }` carries a result: a bare value is not taken for one (it is malformed).
 */
export function finishFromResult(id: string, attempt: number, returned: HandlerResult | void): AttemptFinish {
  if (returned === undefined) return { id, attempt, outcome: 'success', backoffMs: 0, error: null };
  // Handlers are user code: check what came back, whatever the types said.
  const { status, backoffMs = 0, error = null, result } = returned as Partial<Record<keyof HandlerResult, unknown>>;
  if (typeof status !== 'string' || !isOutcome(status)) {
    return invalid(
      id,
      attempt,
      `handler returned status ${JSON.stringify(status)}; return { status: 'success' | 'error' | 'retry' }` +
        " (a result goes in { status: 'success', result })",
    );
  }
  if (typeof backoffMs !== 'number' || !Number.isInteger(backoffMs) || backoffMs < 0) {
    return invalid(
      id,
      attempt,
      `handler returned backoffMs ${String(backoffMs)}; use a whole number of milliseconds >= 0`,
    );
  }
  const finish: AttemptFinish = {
    id,
    attempt,
    outcome: status,
    backoffMs,
    error: error === null ? null : typeof error === 'string' ? error : JSON.stringify(error),
  };
  return result === undefined ? finish : withResult(finish, result);
}

/** A finish that carries a result: a success's, encoded within RESULT_MAX_BYTES, else an `error` that says why. */
function withResult(finish: AttemptFinish, result: unknown): AttemptFinish {
  const { id, attempt } = finish;
  if (finish.outcome !== 'success') {
    return invalid(id, attempt, `handler returned a result with status '${finish.outcome}'; only a success keeps one`);
  }
  const encoded = encodeResult(result);
  return typeof encoded === 'string' ? invalid(id, attempt, encoded) : { ...finish, result: encoded };
}

/** A thrown error: retried after a backoff while attempts remain, else an `error`. */
export function finishFromThrow(
  id: string,
  attempt: number,
  thrown: unknown,
  maxAttempts: number,
  retryBackoffMs: (attempt: number) => number,
): AttemptFinish {
  return finishFromFailure(id, attempt, thrownText(thrown), maxAttempts, retryBackoffMs);
}

/** A thrown value as the attempt's error: an Error's stack, else its text. */
export function thrownText(thrown: unknown): string {
  return thrown instanceof Error ? (thrown.stack ?? thrown.message) : String(thrown);
}

/** A failed attempt (thrown or timed out): retried after a backoff while attempts remain, else an `error`. */
export function finishFromFailure(
  id: string,
  attempt: number,
  error: string,
  maxAttempts: number,
  retryBackoffMs: (attempt: number) => number,
): AttemptFinish {
  if (attempt < maxAttempts) return { id, attempt, outcome: 'retry', backoffMs: retryBackoffMs(attempt), error };
  return { id, attempt, outcome: 'error', backoffMs: 0, error };
}

/** What aborts `job.signal` when a handler runs past `timeoutMs`; its message is the attempt's error. */
export function timeoutError(timeoutMs: number): Error {
  const error = new Error(`timed out after ${timeoutMs} ms`);
  error.name = 'TimeoutError';
  return error;
}

function invalid(id: string, attempt: number, error: string): AttemptFinish {
  return { id, attempt, outcome: 'error', backoffMs: 0, error };
}
