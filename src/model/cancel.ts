/** What a cancel stores as the message's error, and which states it applies to. */
import type { MessageState } from './types.js';

/** The longest reason text a cancel takes, in characters: it becomes the error a failure keeps. */
export const CANCEL_REASON_MAX_CHARS = 1000;

/**
 * The states a cancel applies to: waiting, delayed, running, or a flow's parent waiting for its children (whose
 * children not started are canceled with it). Finished ones (done, failed) refuse it.
 */
export const CANCELABLE_STATES: ReadonlySet<MessageState> = new Set<MessageState>([
  'queued',
  'queued-with-backoff',
  'locked',
  'locked-with-requeue',
  'waiting-children',
]);

/** The error a canceled message fails with: `canceled`, then the caller's reason when given. */
export function cancelError(reason: unknown): string {
  if (reason === undefined || reason === null) return 'canceled';
  if (typeof reason !== 'string') throw new TypeError('a cancel reason must be a string');
  if (reason.length > CANCEL_REASON_MAX_CHARS) {
    throw new TypeError(`a cancel reason is at most ${CANCEL_REASON_MAX_CHARS} characters, not ${reason.length}`);
  }
  return reason === '' ? 'canceled' : `canceled: ${reason}`;
}
