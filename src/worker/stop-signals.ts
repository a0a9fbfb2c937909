/**
 * The three steps of a worker's stop, as signals its loops watch: halt (no more polling), force (no more waiting
 * for handlers), give up (no more waiting for the store, `stopGraceMs` after the handlers have returned).
 */

export class StopSignals {
  /** Aborted by the first stop: no more polling. */
  readonly halt = new AbortController();
  /** Aborted by the second stop: no more waiting for handlers. */
  readonly force = new AbortController();
  /**
   * Aborted `stopGraceMs` after a stop's handlers have returned (or after the second stop): no more waiting for the
   * store. What it has not taken is left to the locks.
   */
  readonly giveUp = new AbortController();
  /** giveUp was aborted: read on every finish, where a plain field costs less than the signal's getters. */
  givenUp = false;
  /** What finishes the store never took are rejected with, once the stop gave up: counted, not reported one by one. */
  readonly leftToLocks = new Error('the stop gave up on the store');
  private graceTimer: NodeJS.Timeout | null = null;

  constructor(
    readonly graceMs: number,
    private readonly reportError: (error: unknown) => void,
  ) {}

  /** Starts the stop's last wait for the store (stopGraceMs), once: the handlers have returned, or a forced stop. */
  startGraceTimer(): void {
    if (this.graceTimer !== null) return;
    this.graceTimer = setTimeout(() => {
      this.givenUp = true;
      this.giveUp.abort(this.leftToLocks);
    }, this.graceMs);
  }

  /** givenUp, read where a check before an await would have the compiler take it for still false. */
  gaveUp(): boolean {
    return this.givenUp;
  }

  clearGraceTimer(): void {
    if (this.graceTimer !== null) clearTimeout(this.graceTimer);
  }

  /** Waits for store work until the stop gives up on the store; a failure that comes first is reported. */
  async storeWait(work: Promise<unknown> | null | undefined): Promise<void> {
    if (work == null) return;
    const reported = work.catch((error: unknown) => {
      if (!this.giveUp.signal.aborted) this.reportError(error);
    });
    await Promise.race([reported, this.whenGivenUp()]);
  }

  /** Resolves once the stop gives up on the store. */
  whenGivenUp(): Promise<void> {
    return aborted(this.giveUp.signal);
  }
}

/** Resolves once `signal` is aborted. */
export function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
}
