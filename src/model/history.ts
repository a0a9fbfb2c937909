/**
 * A message's short history: one record per attempt that did not end in a
 * plain success, newest last, bounded so a message that fails forever stays small.
 */
import type { AttemptRecord } from './types.js';

/** Records kept per message; older ones are dropped. */
export const HISTORY_LIMIT = 10;
/** Characters of an error kept in a record. */
export const ERROR_TAIL_CHARS = 500;

/**
 * An error cut to at most `ERROR_TAIL_CHARS`: its first line (what went wrong,
 * a command's exit code) and the end of the rest (a stack's or stderr's last lines).
 */
export function errorTail(error: string | null): string | null {
  if (error === null || error.length <= ERROR_TAIL_CHARS) return error;
  const newline = error.indexOf('\n');
  const first = (newline < 0 ? error : error.slice(0, newline)).slice(0, ERROR_TAIL_CHARS / 2);
  const room = ERROR_TAIL_CHARS - first.length - 3;
  return `${first}\n…${error.slice(error.length - room)}`;
}

/** The history with `record` appended, its error cut, and the oldest records dropped past the limit. */
export function appendHistory(history: readonly AttemptRecord[], record: AttemptRecord): AttemptRecord[] {
  const next = [...history, { ...record, error: errorTail(record.error) }];
  return next.length > HISTORY_LIMIT ? next.slice(next.length - HISTORY_LIMIT) : next;
}

/** Reads a stored history (JSON); anything unreadable is an empty history rather than a failed call. */
export function parseHistory(json: string | null | undefined): AttemptRecord[] {
  if (json === null || json === undefined || json === '') return [];
  try {
    const value: unknown = JSON.parse(json);
    return Array.isArray(value) ? (value as AttemptRecord[]) : [];
  } catch {
    return [];
  }
}

/** The error a message fails with when its lock was lost `maxDeliveries` times. */
export function maxDeliveriesError(losses: number): string {
  return `lost its lock ${losses} times (maxDeliveries ${losses}): a handler that kills or stalls its worker?`;
}
