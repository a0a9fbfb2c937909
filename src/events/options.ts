/** Validation of the events and waitFor options, with errors that say what is allowed. */
import { MAX_TIMER_MS } from '../model/time.js';
import { checkKnownKeys, checkMs, checkPlainObject } from '../model/validate.js';

/** Where `events()` starts: 'start' (the oldest kept event), 'now' (events written after the call), or a cursor. */
export type EventsStart = string;

export interface EventsOptions {
  /** @defaultValue 'now' */
  readonly after?: EventsStart;
  /** Aborting it ends the iteration (no error). */
  readonly signal?: AbortSignal;
}

export interface WaitForOptions {
  /** Rejects with a TimeoutError (code `TIMEOUT`) after this long. @defaultValue 30000 */
  readonly timeoutMs?: number;
  /** Aborting it rejects the wait with the signal's reason. */
  readonly signal?: AbortSignal;
}

const DEFAULT_WAIT_MS = 30_000;
// setTimeout's own limit.

export function checkEventsOptions(options: unknown): { after: EventsStart; signal: AbortSignal | undefined } {
  const checked = checkPlainObject('options', options);
  checkKnownKeys('events', checked, ['after', 'signal']);
  const after = checked.after === undefined ? 'now' : checkCursorText('after', checked.after, "'start', 'now' or ");
  return { after, signal: checkSignal(checked.signal) };
}

export function checkWaitForOptions(options: unknown): { timeoutMs: number; signal: AbortSignal | undefined } {
  const checked = checkPlainObject('options', options);
  checkKnownKeys('waitFor', checked, ['timeoutMs', 'signal']);
  const timeoutMs =
    checked.timeoutMs === undefined ? DEFAULT_WAIT_MS : checkMs('timeoutMs', checked.timeoutMs, 1, MAX_TIMER_MS);
  return { timeoutMs, signal: checkSignal(checked.signal) };
}

/** An event cursor as the caller passes it back; whether the store made it, the store checks. */
export function checkCursorText(name: string, value: unknown, alternatives = ''): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > 200) {
    throw new TypeError(
      `${name} must be ${alternatives}an event cursor as a page, an event or eventsHead returned it, got ${String(value)}`,
    );
  }
  return value;
}

function checkSignal(value: unknown): AbortSignal | undefined {
  if (value === undefined || value instanceof AbortSignal) return value;
  throw new TypeError(`signal must be an AbortSignal, got ${typeof value}`);
}
