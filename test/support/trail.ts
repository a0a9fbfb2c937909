/**
 * What a test's workers did, in order, with times from the test's start: handler calls and their ends, outcome
 * events, lost locks and recovered errors. A failing store test ends its error message with it, so a failure
 * seen only in CI's tail (a rare race) says what the worker saw, not only what the store held at the end.
 */
import type { Job, Worker } from '../../src/index.js';

/** The newest entries kept: enough for a test's story, bounded for tests that handle thousands of messages. */
const KEPT = 40;

export class Trail {
  private readonly startedAt = performance.now();
  private readonly entries: string[] = [];
  private dropped = 0;

  note(text: string): void {
    this.entries.push(`+${Math.round(performance.now() - this.startedAt)}ms ${text}`);
    if (this.entries.length > KEPT) {
      this.entries.shift();
      this.dropped += 1;
    }
  }

  /** Notes the worker's outcome events and lost locks (listening changes nothing the worker stores). */
  watch(worker: Worker): void {
    worker.on('completed', (e) => this.note(`completed ${e.id}#${e.attempt}`));
    worker.on('retrying', (e) => this.note(`retrying ${e.id}#${e.attempt} (${e.reason}: ${e.error})`));
    worker.on('failed', (e) => this.note(`failed ${e.id}#${e.attempt} (${e.reason}: ${e.error})`));
    worker.on('stalled', (e) => this.note(`stalled ${e.id}#${e.attempt}`));
  }

  /** The handler, noting each call and how it ended. */
  wrap<A extends Job | readonly Job[], T>(handler: (arg: A) => T | Promise<T>): (arg: A) => Promise<T> {
    return async (arg) => {
      const what = Array.isArray(arg) ? `batch of ${arg.length}` : `${(arg as Job).id}#${(arg as Job).attempt}`;
      this.note(`call ${what}`);
      try {
        const result = await handler(arg);
        this.note(`returned ${what}`);
        return result;
      } catch (error) {
        this.note(`threw ${what}`);
        throw error;
      }
    };
  }

  /** The error with the trail appended to its message (it stays the same object, of the same class). */
  explain(error: unknown): unknown {
    if (!(error instanceof Error) || this.entries.length === 0) return error;
    const skipped = this.dropped > 0 ? [`(${this.dropped} earlier entries left out)`] : [];
    const told = `\nworker trail:\n  ${[...skipped, ...this.entries].join('\n  ')}`;
    const { message, stack } = error;
    error.message = message + told;
    // The runner prints the stack, which holds the message as it was when the error was made.
    if (stack !== undefined && stack.includes(message)) error.stack = stack.replace(message, error.message);
    return error;
  }
}
