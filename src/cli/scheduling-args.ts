/**
 * Scheduling values as typed on the command line: priority, run-at, group,
 * debounce, rate limit and group concurrency. Each is checked here with the
 * library's own checks, so a bad value is a UsageError (exit 2) before anything
 * reaches the store, and the message says what is allowed.
 */
import {
  checkDebounce,
  checkGroup,
  checkGroupConcurrency,
  checkPriority,
  checkRateLimit,
  GROUP_CONCURRENCY_MAX,
  PRIORITY_MAX,
  RATE_LIMIT_MAX,
  type Debounce,
} from '../model/scheduling.js';
import type { RateLimit } from '../model/types.js';
import { parseWholeNumber } from './args.js';
import { formatDuration, parseDuration } from './duration.js';
import { UsageError } from './errors.js';

/** The library's TypeError for a bad value, as a usage error naming the flag. */
function asUsage<T>(check: () => T): T {
  try {
    return check();
  } catch (error) {
    if (error instanceof TypeError) throw new UsageError(error.message);
    throw error;
  }
}

/** `--priority N`: 0 (runs first, the default) to PRIORITY_MAX (runs last). */
export function parsePriority(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  if (!/^\d+$/.test(text)) {
    throw new UsageError(
      `--priority must be a whole number from 0 (runs first, the default) to ${PRIORITY_MAX} (runs last), got '${text}'`,
    );
  }
  return asUsage(() => checkPriority(Number(text)));
}

/**
 * `--run-at TIME` (or another time given as text, named by `what`): an ISO 8601 date-time
 * (`2030-01-02T03:04:05Z`) or ms since the epoch.
 */
export function parseRunAt(text: string | undefined, what = '--run-at'): number | undefined {
  if (text === undefined) return undefined;
  if (/^\d+$/.test(text)) return parseWholeNumber(what, text);
  // Date.parse takes many loose forms; only ISO 8601 is documented, so only it is accepted.
  const iso = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})?)?$/.test(text);
  const ms = iso ? Date.parse(text) : NaN;
  if (Number.isNaN(ms) || ms < 0) {
    throw new UsageError(
      `${what} must be an ISO 8601 time like 2030-01-02T03:04:05Z or ms since the epoch, got '${text}'`,
    );
  }
  return ms;
}

/** `--group NAME`. */
export function parseGroup(text: string | undefined): string | undefined {
  return text === undefined ? undefined : asUsage(() => checkGroup(text));
}

/** `--debounce ID --debounce-ms MS`: both or neither. */
export function parseDebounce(id: string | undefined, msText: string | undefined): Debounce | undefined {
  if (id === undefined && msText === undefined) return undefined;
  if (id === undefined || msText === undefined) {
    throw new UsageError(
      '--debounce ID and --debounce-ms MS go together: which messages replace each other, and the quiet time',
    );
  }
  const ms = parseDuration('--debounce-ms', msText, 0);
  return asUsage(() => checkDebounce({ id, ms }));
}

const NONE = 'none';

/**
 * `rate_limit=` (and `group_rate_limit=`, `key`) values: MAX/PERIOD, the period a duration as everywhere on the
 * command line (`100/1s`, `5/250ms`, `10/1h30m`, `1000/1d`, bare ms) or a lone unit for one of it (`1000/m`);
 * `none` or empty removes it.
 */
export function parseRateLimit(text: string, key = 'rate_limit'): RateLimit | null {
  if (text === NONE || text === '') return null;
  const allowed =
    `${key} must look like MAX/PERIOD with MAX from 1 to ${RATE_LIMIT_MAX} and PERIOD a duration like 1s, ` +
    `250ms, 1m, 1h or 1d (e.g. 100/1s), or none to remove it; got '${text}'`;
  const match = /^(\d+)\/(.+)$/.exec(text);
  if (match === null) throw new UsageError(allowed);
  const [, max = '', period = ''] = match;
  try {
    const perMs = parseDuration(key, /^[a-z]+$/.test(period) ? `1${period}` : period);
    return checkRateLimit({ max: Number(max), perMs });
  } catch {
    throw new UsageError(allowed);
  }
}

/** A rate limit as `parseRateLimit` reads it, its period in the largest unit that divides it. */
export function formatRateLimit(limit: RateLimit | null): string {
  return limit === null ? NONE : `${limit.max}/${formatDuration(limit.perMs)}`;
}

/** `group_concurrency=` values: a whole number, or `none` (or empty) for no limit. */
export function parseGroupConcurrency(text: string): number | null {
  if (text === NONE || text === '') return null;
  const allowed = `group_concurrency must be a whole number from 1 to ${GROUP_CONCURRENCY_MAX}, or none; got '${text}'`;
  if (!/^\d+$/.test(text)) throw new UsageError(allowed);
  try {
    return checkGroupConcurrency(Number(text));
  } catch {
    throw new UsageError(allowed);
  }
}

export function formatGroupConcurrency(value: number | null): string {
  return value === null ? NONE : String(value);
}
