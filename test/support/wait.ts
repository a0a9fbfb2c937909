/** Condition-based waiting: tests wait for what they need, never for a guessed duration. */
import { AssertionError } from 'node:assert';
import { setTimeout as delay } from 'node:timers/promises';
import { inspect } from 'node:util';

export interface WaitOptions {
  /** Fail after this long. @defaultValue 5000 */
  readonly timeoutMs?: number;
  /** Check this often. @defaultValue 20 */
  readonly intervalMs?: number;
  /** What is awaited, for the failure message (a function is read at failure time). */
  readonly what?: string | (() => string);
}

type Truthy<T> = Exclude<T, false | null | undefined | 0 | ''>;

/** Resolves with the predicate's first truthy value; fails with the last value seen after `timeoutMs`. */
export async function waitFor<T>(predicate: () => T | Promise<T>, options: WaitOptions = {}): Promise<Truthy<T>> {
  const { timeoutMs = 5000, intervalMs = 20, what = 'a condition' } = options;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await predicate();
    if (value) return value as Truthy<T>;
    if (Date.now() >= deadline) {
      throw new AssertionError({
        message:
          `timed out after ${timeoutMs} ms waiting for ${typeof what === 'function' ? what() : what}; ` +
          `last value: ${inspect(value, { depth: 4 })}`,
      });
    }
    await delay(intervalMs);
  }
}

/**
 * Lets time pass for a check that something does NOT happen. Only for such
 * negative checks: a slow machine makes them weaker, never flaky.
 */
export function quietPeriod(ms = 300): Promise<void> {
  return delay(ms).then(() => undefined);
}

/** Races `promise` against a deadline; a hang becomes a clear failure. */
export async function within<T>(ms: number, promise: Promise<T>, what: string): Promise<T> {
  const timeout = new AbortController();
  try {
    return await Promise.race([
      promise,
      delay(ms, undefined, { signal: timeout.signal }).then(() => {
        throw new AssertionError({ message: `${what} did not settle within ${ms} ms` });
      }),
    ]);
  } finally {
    timeout.abort();
  }
}

export interface Gate {
  /** Resolves once the gate is opened. */
  readonly opened: Promise<void>;
  readonly isOpen: boolean;
  open(): void;
}

/** A promise a test opens by hand, to hold a handler mid-flight. */
export function gate(): Gate {
  let open!: () => void;
  let isOpen = false;
  const opened = new Promise<void>((resolve) => {
    open = () => {
      isOpen = true;
      resolve();
    };
  });
  return {
    opened,
    get isOpen() {
      return isOpen;
    },
    open: () => open(),
  };
}

/** Resolves once `signal` is aborted: a handler that runs until the worker takes its message away. */
export function untilAborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
}
