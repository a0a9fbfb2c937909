/**
 * A progress display on stderr: an updating bar on a terminal, else a line at
 * every 10% so logs stay readable. Used by `kvmq enqueue --file` and the demo.
 */

/** `bar`: redrawn in place; `lines`: a line per 10%; `off`: nothing. */
export type ProgressMode = 'bar' | 'lines' | 'off';

export interface ProgressOptions {
  readonly label: string;
  /** What `done` counts up to; null when unknown (then only the count and rate show). */
  readonly total: number | null;
  /** What the count counts. @defaultValue 'messages' */
  readonly unit?: string;
  /** @defaultValue 'bar' when the stream is a terminal, else 'lines' */
  readonly mode?: ProgressMode;
  /** @defaultValue process.stderr */
  readonly stream?: NodeJS.WriteStream;
}

// Redraws faster than this only cost CPU.
const REDRAW_MS = 100;
const STEPS = 10;

export function defaultProgressMode(stream: NodeJS.WriteStream = process.stderr): ProgressMode {
  return stream.isTTY ? 'bar' : 'lines';
}

export class Progress {
  private readonly label: string;
  private readonly total: number | null;
  private readonly unit: string;
  private readonly mode: ProgressMode;
  private readonly stream: NodeJS.WriteStream;
  private readonly startedAt = Date.now();
  private done = 0;
  private count = 0;
  private drawnAt = 0;
  private stepsShown = 0;
  private finished = false;

  constructor(options: ProgressOptions) {
    this.label = options.label;
    this.total = options.total;
    this.unit = options.unit ?? 'messages';
    this.stream = options.stream ?? process.stderr;
    this.mode = options.mode ?? defaultProgressMode(this.stream);
  }

  /** `done` moves the bar (towards `total`); `count` is the number shown, when it counts something else (e.g. bytes vs lines). */
  update(done: number, count = done): void {
    this.done = done;
    this.count = count;
    if (this.mode === 'bar') {
      const now = Date.now();
      if (now - this.drawnAt < REDRAW_MS) return;
      this.drawnAt = now;
      this.stream.write(`\r${this.barLine()}\x1b[K`);
    } else if (this.mode === 'lines' && this.total !== null && this.total > 0) {
      const steps = Math.min(STEPS, Math.floor((this.done / this.total) * STEPS));
      if (steps > this.stepsShown && steps < STEPS) {
        this.stepsShown = steps;
        this.stream.write(`${this.label}: ${steps * 10}% (${this.countText()})\n`);
      }
    }
  }

  /** Draws the final state and ends the line. Safe to call twice. */
  finish(): void {
    if (this.finished) return;
    this.finished = true;
    if (this.mode === 'bar') this.stream.write(`\r${this.barLine()}\x1b[K\n`);
    else if (this.mode === 'lines') this.stream.write(`${this.label}: done (${this.countText()})\n`);
  }

  private barLine(): string {
    const tail = ` ${this.countText()}`;
    if (this.total === null || this.total <= 0) return `${this.label}${tail}`;
    const fraction = Math.min(1, this.done / this.total);
    const percent = `${Math.floor(fraction * 100)}%`.padStart(5);
    const room = (this.stream.columns || 80) - this.label.length - percent.length - tail.length - 4;
    const width = Math.max(10, Math.min(40, room));
    const filled = Math.round(fraction * width);
    return `${this.label} [${'#'.repeat(filled)}${'.'.repeat(width - filled)}]${percent}${tail}`;
  }

  private countText(): string {
    const seconds = Math.max(0.001, (Date.now() - this.startedAt) / 1000);
    return `${formatCount(this.count)} ${this.unit}, ${formatCount(Math.round(this.count / seconds))}/s`;
  }
}

/**
 * `n` with commas between groups of three digits. Integers are grouped by hand: the first toLocaleString call
 * loads ICU's number data, about 10 ms of every short command's start.
 */
export function formatCount(n: number): string {
  if (!Number.isSafeInteger(n)) return n.toLocaleString('en-US');
  return String(n).replace(/\B(?=(\d{3})+$)/g, ',');
}

/** `n` and a noun that agrees with it: 1 message, 2 messages. */
export function countOf(n: number, noun: string): string {
  return `${formatCount(n)} ${noun}${n === 1 ? '' : 's'}`;
}
