/**
 * Turns notifications into something a loop can await. A ring while nobody waits is kept for the next wait,
 * so a notification that arrives between a read and the wait is never lost.
 */
import { setLongTimeout } from '../model/time.js';

export class Doorbell {
  private rung = false;
  private wake: (() => void) | null = null;

  readonly ring = (): void => {
    this.rung = true;
    const wake = this.wake;
    this.wake = null;
    wake?.();
  };

  /** Resolves at the next ring (at once if one came since the last wait), after `ms`, or when `signal` aborts. */
  async wait(ms: number, signal: AbortSignal): Promise<void> {
    if (!this.rung && !signal.aborted) {
      await new Promise<void>((resolve) => {
        const done = (): void => {
          timer.clear();
          signal.removeEventListener('abort', done);
          this.wake = null;
          resolve();
        };
        const timer = setLongTimeout(done, ms);
        signal.addEventListener('abort', done, { once: true });
        this.wake = done;
      });
    }
    this.rung = false;
  }
}
