/**
 * A message's own retry policy (attempts, backoff, timeout), given at enqueue
 * and stored with the message; the worker applies it over its own options.
 */
import { MAX_TIMER_MS } from './time.js';
import { checkCount, checkKnownKeys, checkMs, checkPlainObject } from './validate.js';
import type { BackoffPolicy, MessagePolicy } from './types.js';

/** The policy of the enqueue options, or null when they set none. */
export function checkPolicy(options: {
  readonly attempts?: unknown;
  readonly backoff?: unknown;
  readonly timeoutMs?: unknown;
}): MessagePolicy | null {
  if (options.attempts === undefined && options.backoff === undefined && options.timeoutMs === undefined) return null;
  const policy: { attempts?: number; backoff?: BackoffPolicy; timeoutMs?: number } = {};
  if (options.attempts !== undefined) policy.attempts = checkCount('attempts', options.attempts, 1, 1_000_000);
  if (options.backoff !== undefined) policy.backoff = checkBackoff(options.backoff);
  if (options.timeoutMs !== undefined) policy.timeoutMs = checkMs('timeoutMs', options.timeoutMs, 1, MAX_TIMER_MS);
  return Object.keys(policy).length === 0 ? null : policy;
}

/**
 * `policy` with the deadline of a time to live of `expireAfterMs` from now (EnqueueOptions.expireAfterMs): a
 * positive whole number of ms, longer than the message's delay `delayMs` (it would expire before it could run).
 */
export function withExpiry(
  policy: MessagePolicy | null,
  expireAfterMs: unknown,
  delayMs: number,
): MessagePolicy | null {
  if (expireAfterMs === undefined) return policy;
  const ttl = checkMs('expireAfterMs', expireAfterMs, 1);
  if (ttl <= delayMs) {
    throw new TypeError(
      `expireAfterMs (${ttl}) must be longer than the message's delay (${delayMs} ms): it would expire before it could run`,
    );
  }
  return { ...policy, expireAt: Date.now() + ttl };
}

/** The message's time to live ended (a handler did not start it by `policy.expireAt`). */
export function expired(policy: MessagePolicy | null, now: number): boolean {
  return policy?.expireAt !== undefined && now >= policy.expireAt;
}

/** The error a message fails with when its time to live ended before a handler started it. */
export const EXPIRED_ERROR = 'expired';

function checkBackoff(value: unknown): BackoffPolicy {
  if (typeof value === 'number') return checkMs('backoff', value);
  const backoff = checkPlainObject('backoff', value);
  checkKnownKeys('backoff', backoff, ['type', 'delayMs']);
  if (backoff.type !== 'fixed' && backoff.type !== 'exponential') {
    throw new TypeError(`backoff.type must be 'fixed' or 'exponential', got ${JSON.stringify(backoff.type)}`);
  }
  return { type: backoff.type, delayMs: checkMs('backoff.delayMs', backoff.delayMs) };
}

/** The backoff before retrying after `attempt` failed. */
export function policyBackoffMs(backoff: BackoffPolicy, attempt: number): number {
  if (typeof backoff === 'number') return backoff;
  if (backoff.type === 'fixed') return backoff.delayMs;
  return Math.min(Number.MAX_SAFE_INTEGER, backoff.delayMs * 2 ** Math.min(40, Math.max(0, attempt - 1)));
}

/** The stored form: compact JSON, or null for no policy (most messages; stores then write nothing). */
export function encodePolicy(policy: MessagePolicy | null): string | null {
  return policy === null ? null : JSON.stringify(policy);
}

export function decodePolicy(stored: string | null | undefined): MessagePolicy | null {
  if (stored === null || stored === undefined || stored === '') return null;
  try {
    const value: unknown = JSON.parse(stored);
    return typeof value === 'object' && value !== null ? value : null;
  } catch {
    return null;
  }
}
