/** Durations in milliseconds, so defaults read as `30 * SECOND`. */
export const SECOND = 1000;
export const MINUTE = 60 * SECOND;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;

/** The longest delay a Node timer keeps (about 24.8 days): a longer one runs after 1 ms, with a warning. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** A delay a timer can be armed with: at least 0, at most `cap` (a wait longer than that is re-armed). */
export function timerDelay(ms: number, cap = MAX_TIMER_MS): number {
  return Math.min(cap, Math.max(0, ms));
}

/** A timer that may end weeks or years ahead (setLongTimeout). */
export interface LongTimeout {
  /** The delay the current leg was armed with: at most the cap. */
  readonly armedMs: number;
  clear(): void;
  /** Lets the process exit while only this timer is left, as a Node timer's unref(). */
  unref(): LongTimeout;
}

/**
 * Calls `fn` once `ms` have passed, however far ahead (a wake-up at a message's `runAt`, a schedule's next slot,
 * a lease's end): the wait runs in legs of at most `cap`, each re-armed for what is left by the clock, so a
 * far-off time neither fires early nor spins as a plain timer beyond MAX_TIMER_MS does.
 */
export function setLongTimeout(fn: () => void, ms: number, cap = MAX_TIMER_MS): LongTimeout {
  const at = Date.now() + Math.max(0, ms);
  // Only a wait in legs is re-armed, up to its last ms: a plain timer fires as Node runs it, even a tick before
  // `at` by the clock, while a leg's end by the clock may fall short of `at` by that tick too.
  const inLegs = ms > cap;
  let timer: NodeJS.Timeout | null = null;
  let unref = false;
  const arm = (left: number): void => {
    handle.armedMs = timerDelay(left, cap);
    timer = setTimeout(leg, handle.armedMs);
    if (unref) timer.unref();
  };
  const leg = (): void => {
    timer = null;
    const left = at - Date.now();
    if (inLegs && left > 0) arm(left);
    else fn();
  };
  const handle = {
    armedMs: 0,
    clear(): void {
      if (timer !== null) clearTimeout(timer);
      timer = null;
    },
    unref(): LongTimeout {
      unref = true;
      timer?.unref();
      return handle;
    },
  };
  arm(ms);
  return handle;
}

/** Waits `ms`, or until any of `signals` aborts. */
export function sleep(ms: number, ...signals: (AbortSignal | undefined)[]): Promise<void> {
  return new Promise((resolve) => {
    if (signals.some((signal) => signal?.aborted)) return resolve();
    const timer = setLongTimeout(done, ms);
    for (const signal of signals) signal?.addEventListener('abort', done, { once: true });
    function done(): void {
      timer.clear();
      for (const signal of signals) signal?.removeEventListener('abort', done);
      resolve();
    }
  });
}

/** What `promise` gives within `ms`, or undefined once `ms` passed first (the promise is left to settle). */
export async function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ms)));
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}
