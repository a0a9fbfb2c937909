/** Durations on the command line: `500ms`, `30s`, `5m`, `2h`, `1d`, combined (`1h30m`), or bare milliseconds. */
import { UsageError } from './errors.js';

const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const DURATION = /^(?:\d+(?:ms|s|m|h|d))+$/;
const PART = /(\d+)(ms|s|m|h|d)/g;

/** Milliseconds, at least `min`; anything else is a usage error that shows the accepted forms. */
export function parseDuration(what: string, text: string, min = 1): number {
  let ms = NaN;
  if (/^\d+$/.test(text)) ms = Number(text);
  else if (DURATION.test(text)) {
    ms = 0;
    for (const [, count, unit] of text.matchAll(PART)) ms += Number(count) * (UNIT_MS[unit ?? ''] ?? NaN);
  }
  if (!Number.isSafeInteger(ms) || ms < min) {
    throw new UsageError(
      `${what} must be a duration of at least ${min} ms such as 500ms, 30s, 5m, 2h, 1d or 1h30m, got '${text}'`,
    );
  }
  return ms;
}

/** `ms` in the largest unit that divides it (`90s`, `2h`, `1d`), which parseDuration reads back. */
export function formatDuration(ms: number): string {
  const unit = ['d', 'h', 'm', 's'].find((u) => ms > 0 && ms % (UNIT_MS[u] ?? 1) === 0) ?? 'ms';
  return `${ms / (UNIT_MS[unit] ?? 1)}${unit}`;
}

export function optionalDuration(what: string, text: string | undefined, min = 1): number | undefined {
  return text === undefined ? undefined : parseDuration(what, text, min);
}

/** The help row that says what a `T` in an option's help accepts. */
export const DURATION_HELP: readonly [string, string] = ['T (durations)', '500ms, 30s, 5m, 2h, 1d, 1h30m, or bare ms'];
