/**
 * What `kvmq work` says about outcomes: a stderr line per attempt that failed
 * or will be retried, and the counts behind its summary and exit code.
 */
import type { FailedEvent, RetryingEvent, Worker } from '../index.js';

/** An attempt's error is cut to this many characters on its stderr line. */
export const ERROR_LINE_CHARS = 200;

export class OutcomeTally {
  succeeded = 0;
  failed = 0;
  retried = 0;

  /** `counts(id, attempt)` says whether an attempt is one of ours (the CLI also hands messages back unrun). */
  constructor(
    worker: Worker,
    private readonly counts: (id: string, attempt: number) => boolean,
  ) {
    worker.on('completed', ({ id, attempt }) => {
      if (this.counts(id, attempt)) this.succeeded += 1;
    });
    worker.on('retrying', (event) => {
      if (!this.counts(event.id, event.attempt)) return;
      this.retried += 1;
      say(attemptLine(event, `failed, retrying in ${event.backoffMs} ms`));
    });
    worker.on('failed', (event) => {
      if (!this.counts(event.id, event.attempt)) return;
      this.failed += 1;
      say(attemptLine(event, 'failed'));
    });
  }

  get handled(): number {
    return this.succeeded + this.failed + this.retried;
  }

  summary(): string {
    return `${this.handled} handled: ${this.succeeded} succeeded, ${this.failed} failed, ${this.retried} retried`;
  }
}

export function say(line: string): void {
  process.stderr.write(`kvmq work: ${line}\n`);
}

function attemptLine(event: FailedEvent | RetryingEvent, what: string): string {
  return `${event.queue} ${event.id} attempt ${event.attempt} ${what}: ${errorLine(event.error)}`;
}

/**
 * A multi-line error as one line of at most `max` characters: its first line
 * (say, a command's exit code), then the end of the rest (the last lines of its stderr).
 */
export function errorLine(error: string | null, max = ERROR_LINE_CHARS): string {
  if (error === null) return 'no error text';
  const [first = '', ...rest] = error
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '');
  const tail = rest.join(' | ');
  const line = tail === '' ? first : `${first}: ${tail}`;
  if (line.length <= max) return line;
  if (first.length + 3 >= max) return `${first.slice(0, max - 1)}…`;
  return `${first}: …${tail.slice(tail.length - (max - first.length - 3))}`;
}
