/**
 * What a test's workers did, in order, with times from the test's start: claims and what they brought, handler
 * calls and their ends, outcome events, lost locks and recovered errors. A failing store test ends its error
 * message with it, so a failure seen only in CI's tail (a rare race) says what the worker saw, not only what
 * the store held at the end.
 */
import type { Job, Worker } from '../../src/index.js';
import type { Store } from '../../src/stores/contract/contract.js';

/** The newest entries kept: enough for a test's story, bounded for tests that handle thousands of messages. */
const KEPT = 40;

/** One entry: what happened, when first and last (the same thing again in a row counts as one). */
interface Entry {
  readonly text: string;
  readonly first: number;
  last: number;
  times: number;
}

export class Trail {
  private readonly startedAt = performance.now();
  private readonly entries: Entry[] = [];
  private dropped = 0;

  note(text: string): void {
    const at = Math.round(performance.now() - this.startedAt);
    const latest = this.entries.at(-1);
    if (latest?.text === text) {
      latest.last = at;
      latest.times += 1;
      return;
    }
    this.entries.push({ text, first: at, last: at, times: 1 });
    if (this.entries.length > KEPT) {
      this.entries.shift();
      this.dropped += 1;
    }
  }

  /** Notes what each claim on `store` brought: a worker stuck, or claiming and finding nothing, shows. */
  watchClaims(store: Store): void {
    const claim = store.claim.bind(store);
    store.claim = async (queue, request) => {
      const result = await claim(queue, request);
      const brought = result.messages.map((m) => `${m.id}#${m.attempt}`);
      this.note(`claim: ${brought.length === 0 ? 'none' : brought.join(' ')}`);
      return result;
    };
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
    const lines = this.entries.map((e) =>
      e.times === 1 ? `+${e.first}ms ${e.text}` : `+${e.first}ms..+${e.last}ms ${e.text} (×${e.times})`,
    );
    const told = `\nworker trail:\n  ${[...skipped, ...lines].join('\n  ')}`;
    const { message, stack } = error;
    error.message = message + told;
    // The runner prints the stack, which holds the message as it was when the error was made.
    if (stack !== undefined && stack.includes(message)) error.stack = stack.replace(message, error.message);
    return error;
  }
}
