/**
 * Batch consumption (the worker option `batch`): what it takes, and how a batch handler's outcome is split into
 * one finish per message, each under that message's own attempts and backoff.
 */
import type { AttemptFinish } from '../stores/contract/contract.js';
import { MAX_TIMER_MS } from '../model/time.js';
import { checkCount, checkKnownKeys, checkMs, checkPlainObject } from '../model/validate.js';
import { finishFromFailure, finishFromResult } from './outcome.js';
import type { BatchOutcome, HandlerResult } from '../model/types.js';

export interface BatchOptions {
  /** Messages a handler is given at most at once. */
  readonly size: number;
  /**
   * How long a free handler waits for a fuller batch when fewer than `size` messages are ready; 0 hands it
   * what is ready at once. @defaultValue 0
   */
  readonly waitMs?: number;
}

export interface CheckedBatchOptions {
  readonly size: number;
  readonly waitMs: number;
}

/** The most messages one batch takes (as many as a worker's `concurrency`). */
export const MAX_BATCH_SIZE = 10_000;

export function checkBatchOptions(value: unknown): CheckedBatchOptions | null {
  if (value === undefined) return null;
  const batch = checkPlainObject('batch', value);
  checkKnownKeys('worker batch', batch, ['size', 'waitMs']);
  return {
    size: checkCount('batch.size', batch.size, 1, MAX_BATCH_SIZE),
    waitMs: batch.waitMs === undefined ? 0 : checkMs('batch.waitMs', batch.waitMs, 0, MAX_TIMER_MS),
  };
}

/** One message of a batch, as the split needs it. */
export interface BatchMember {
  readonly id: string;
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly retryBackoffMs: (attempt: number) => number;
}

/**
 * What a batch handler returned, as one finish per member: one outcome applies to each; an array gives each its
 * own. An array of the wrong length fails every member as a thrown error would (retried per its attempts), and
 * `wrongLength` is true so the worker counts it as thrown.
 */
export function finishesFromBatch(
  members: readonly BatchMember[],
  returned: BatchOutcome,
): { readonly finishes: AttemptFinish[]; readonly wrongLength: boolean } {
  if (!Array.isArray(returned)) {
    const one = returned as HandlerResult | undefined;
    return { finishes: members.map((m) => finishFromResult(m.id, m.attempt, one)), wrongLength: false };
  }
  const outcomes = returned as readonly (HandlerResult | undefined)[];
  if (outcomes.length !== members.length) {
    const error =
      `batch handler returned ${outcomes.length} outcome(s) for a batch of ${members.length} message(s); ` +
      'return one outcome for all, or an array of exactly one outcome per message, in order';
    return { finishes: failAll(members, error), wrongLength: true };
  }
  return { finishes: members.map((m, i) => finishFromResult(m.id, m.attempt, outcomes[i])), wrongLength: false };
}

/** Every member failed with `error` (thrown, timed out, a wrong-length answer): each retried per its attempts. */
export function failAll(members: readonly BatchMember[], error: string): AttemptFinish[] {
  return members.map((m) => finishFromFailure(m.id, m.attempt, error, m.maxAttempts, m.retryBackoffMs));
}
