/**
 * What a worker tells its listeners. Outcome events come once the store has
 * stored the outcome, so a listener never hears of a result the store did not keep.
 */
import type { FailureReason } from '../model/types.js';

export type { FailureReason };

interface AttemptEvent {
  readonly queue: string;
  readonly id: string;
  /** 1 on the first delivery. */
  readonly attempt: number;
}

interface HandledEvent extends AttemptEvent {
  /** How long the handler ran (up to the timeout, for a timed-out attempt). */
  readonly durationMs: number;
}

/** The handler succeeded and the store holds the success. */
export interface CompletedEvent<R = unknown> extends HandledEvent {
  /** The result the handler returned with its success, as stored (decoded); absent when it returned none. */
  readonly result?: R;
}

/** The attempt failed for good (outcome `error`): no further attempt follows. */
export interface FailedEvent extends HandledEvent {
  /** The message's last error; null when the handler returned `error` without text. */
  readonly error: string | null;
  readonly reason: FailureReason;
}

/** The attempt did not succeed and the message is queued again after `backoffMs`. */
export interface RetryingEvent extends HandledEvent {
  readonly error: string | null;
  readonly reason: FailureReason;
  readonly backoffMs: number;
}

/**
 * The worker lost the message's lock (it expired, or the message was cleared)
 * before its outcome was stored: another worker may handle it again.
 */
export type StalledEvent = AttemptEvent;

/** Event name → listener arguments, as Node's typed EventEmitter takes them. */
export interface WorkerEvents {
  completed: [event: CompletedEvent];
  failed: [event: FailedEvent];
  retrying: [event: RetryingEvent];
  stalled: [event: StalledEvent];
  /** Errors the worker recovered from: the same ones `onError` receives. */
  error: [error: unknown];
}
