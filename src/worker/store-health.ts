/**
 * How a worker's store calls fare: claims, finishes and renewals share one count of failures in a row (so each
 * failure lengthens every loop's backoff), and a call that gets through again ends every loop's wait at once.
 */
import { expBackoff } from '../model/backoff.js';
import { sleep } from '../model/time.js';

// How long a failing store call waits before the next try, at most: once the store is back, a worker resumes
// within this (or sooner, when another of its calls gets through first; see answered).
const MAX_ERROR_BACKOFF_MS = 5000;
// ...and while stopping, when only a few seconds (stopGraceMs) are left to store what the worker holds.
const MAX_STOPPING_BACKOFF_MS = 1000;

export class StoreHealth {
  /** Store calls failed since the last that got through. */
  failures = 0;
  /** The last store failure, for the stop that gives up. */
  lastError: unknown = null;
  /** Aborted when a store call succeeds after failures: every loop waiting out a failure's backoff tries again. */
  private back = new AbortController();

  constructor(
    private readonly reportError: (error: unknown) => void,
    /** Aborted by the first stop: backoffs are shorter from then on. */
    private readonly halt: AbortSignal,
  ) {}

  /** Reports a failed call and waits out its backoff, or until `signal` aborts or another call gets through. */
  async failed(error: unknown, signal: AbortSignal): Promise<void> {
    this.failures += 1;
    this.lastError = error;
    this.reportError(error);
    const max = this.halt.aborted ? MAX_STOPPING_BACKOFF_MS : MAX_ERROR_BACKOFF_MS;
    await sleep(expBackoff(this.failures, { factor: 100, max }), signal, this.back.signal);
  }

  /** A store call got through: after failures, the loops waiting out their backoff try again now. */
  answered(): void {
    if (this.failures === 0) return;
    this.failures = 0;
    this.back.abort();
    this.back = new AbortController();
  }
}
