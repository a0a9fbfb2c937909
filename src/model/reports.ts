/**
 * What a handler reports while it runs (`job.progress`, `job.log`): the limits every store keeps, the checks made
 * before anything is sent, and the bounded log each store appends to. Store-independent.
 */
import { JobReportError } from './errors.js';

/** The largest progress value, as JSON text, in bytes: progress is a number or a small object, not a result. */
export const PROGRESS_MAX_BYTES = 4096;
/** A log line longer than this (UTF-8 bytes) is cut, and its end says how much was cut. */
export const LOG_LINE_MAX_BYTES = 2048;
/** A message keeps at most this many log lines, the oldest dropped first... */
export const LOG_MAX_LINES = 200;
/** ...and at most this many bytes of them (UTF-8). */
export const LOG_MAX_BYTES = 64 * 1024;
/** A message's reports reach the store at most once per this interval (more often only with its finish). */
export const REPORT_EVERY_MS = 250;

/** A message's log as stored: its lines, oldest first, and how many older ones were dropped to keep it bounded. */
export interface StoredLog {
  readonly lines: readonly string[];
  readonly dropped: number;
}

export const EMPTY_LOG: StoredLog = { lines: [], dropped: 0 };

// JSON.stringify is typed as returning a string, but returns undefined for undefined, a function or a symbol.
const stringify: (value: unknown) => string | undefined = JSON.stringify;

/** The progress value as the JSON text stores keep; throws JobReportError when it cannot be stored. */
export function encodeProgress(value: unknown): string {
  let text: string | undefined;
  try {
    text = stringify(value);
  } catch (error) {
    throw new JobReportError(`job.progress(value): value is not JSON-encodable (${errorText(error)})`);
  }
  if (text === undefined) {
    throw new JobReportError(`job.progress(value): ${typeof value} is not JSON-encodable; pass a number or JSON`);
  }
  const bytes = Buffer.byteLength(text);
  if (bytes > PROGRESS_MAX_BYTES) {
    throw new JobReportError(
      `job.progress(value): value is ${bytes} bytes as JSON, over the limit of ${PROGRESS_MAX_BYTES}; ` +
        'report a small summary (a number, a few fields) and keep large data elsewhere',
    );
  }
  return text;
}

/** A log line as stored: a string, cut to LOG_LINE_MAX_BYTES with a note of how many bytes were cut. */
export function logLine(line: unknown): string {
  if (typeof line !== 'string') throw new JobReportError(`job.log(line): line must be a string, not ${typeof line}`);
  const bytes = Buffer.byteLength(line);
  if (bytes <= LOG_LINE_MAX_BYTES) return line;
  const note = ` … [${bytes - LOG_LINE_MAX_BYTES} more bytes cut]`;
  // Cut on a character boundary: decoding a byte prefix drops a split character's bytes as U+FFFD, removed here.
  const head = Buffer.from(line)
    .subarray(0, LOG_LINE_MAX_BYTES)
    .toString()
    .replace(/\uFFFD$/u, '');
  return head + note;
}

/** The log with `lines` appended, the oldest lines dropped (and counted) to keep it within its limits. */
export function appendLog(log: StoredLog, lines: readonly string[]): StoredLog {
  const all = [...log.lines, ...lines];
  let bytes = 0;
  let keep = all.length;
  // Newest first, until a limit is reached: what is left over is dropped.
  for (let i = all.length - 1; i >= 0; i--) {
    const size = Buffer.byteLength(all[i] as string);
    if (all.length - i > LOG_MAX_LINES || bytes + size > LOG_MAX_BYTES) break;
    bytes += size;
    keep = i;
  }
  return { lines: all.slice(keep), dropped: log.dropped + keep };
}

/** A stored log's JSON text, as the SQL stores keep it in one column. */
export function parseStoredLog(text: string | null, dropped: number): StoredLog {
  if (text === null) return { lines: [], dropped };
  return { lines: JSON.parse(text) as string[], dropped };
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
