/**
 * When, in what order and how fast messages run: priorities, groups, debounce
 * and rate limits, checked at the API boundary. Stores receive these values
 * already checked (see NewMessage and QueueConfig).
 */
import { checkCount, checkFilterToken, checkKnownKeys, checkMessageId, checkMs, checkPlainObject } from './validate.js';
import type { RateLimit } from './types.js';

/** The highest priority, and every message's priority unless it gives one: lower numbers run first. */
export const DEFAULT_PRIORITY = 0;
/** The lowest priority a message may have. */
export const PRIORITY_MAX = 1000;
/** Priorities in keys and node names take this many digits, zero-padded, so they sort as numbers. */
export const PRIORITY_DIGITS = 4;
/** Largest `groupConcurrency`. */
export const GROUP_CONCURRENCY_MAX = 100_000;
/** Largest `rateLimit.max`. */
export const RATE_LIMIT_MAX = 1_000_000;

/** A priority: a whole number from 0 (runs first, the default) to PRIORITY_MAX (runs last). */
export function checkPriority(value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > PRIORITY_MAX) {
    throw new TypeError(
      `priority must be a whole number from 0 (runs first, the default) to ${PRIORITY_MAX} (runs last), ` +
        `got ${String(value)}`,
    );
  }
  return value;
}

/** A priority as a fixed-width decimal for key and node names: `0003`. */
export function priorityKey(priority: number): string {
  return priority.toString().padStart(PRIORITY_DIGITS, '0');
}

/** A group name: 1-64 letters, digits, '_', '.' or '-' (it becomes part of keys and node names). */
export function checkGroup(value: unknown): string {
  if (typeof value !== 'string') {
    throw new TypeError(`group must be a string of 1-64 letters, digits, '_', '.' or '-', got ${String(value)}`);
  }
  try {
    return checkFilterToken('value', value);
  } catch {
    throw new TypeError(`group ${JSON.stringify(value)} is invalid: use 1-64 letters, digits, '_', '.' or '-'`);
  }
}

/** A message's debounce: a still-waiting message with the same `id` is replaced, and runs `ms` after the last. */
export interface Debounce {
  readonly id: string;
  readonly ms: number;
}

export function checkDebounce(value: unknown): Debounce {
  const debounce = checkPlainObject('debounce', value);
  checkKnownKeys('debounce', debounce, ['id', 'ms']);
  if (debounce.id === undefined || debounce.ms === undefined) {
    throw new TypeError('debounce needs both an id (which messages replace each other) and ms (the quiet time)');
  }
  let id: string;
  try {
    id = checkMessageId(debounce.id);
  } catch {
    throw new TypeError(
      `debounce id ${JSON.stringify(debounce.id)} is invalid: use 1-256 letters, digits or any of _ . : @ + = -`,
    );
  }
  return { id, ms: checkMs('debounce.ms', debounce.ms) };
}

/** An absolute time to run at: ms since the epoch or a Date; returns ms since the epoch. */
export function checkRunAt(value: unknown): number {
  const ms = value instanceof Date ? value.getTime() : value;
  if (typeof ms !== 'number' || !Number.isInteger(ms) || ms < 0) {
    throw new TypeError(`runAt must be a Date or a whole number of ms since the epoch, got ${String(value)}`);
  }
  return ms;
}

/** A rate limit as `rateLimit` or `groupRateLimit` (`name`) takes it: `{ max, perMs }`, or null for none. */
export function checkRateLimit(value: unknown, name = 'rateLimit'): RateLimit | null {
  if (value === null) return null;
  const limit = checkPlainObject(name, value);
  checkKnownKeys(name, limit, ['max', 'perMs']);
  if (limit.max === undefined || limit.perMs === undefined) {
    throw new TypeError(`${name} needs max (messages) and perMs (per this many ms), e.g. { max: 100, perMs: 1000 }`);
  }
  return {
    max: checkCount(`${name}.max`, limit.max, 1, RATE_LIMIT_MAX),
    perMs: checkMs(`${name}.perMs`, limit.perMs, 1),
  };
}

export function checkGroupConcurrency(value: unknown): number | null {
  if (value === null) return null;
  return checkCount('groupConcurrency', value, 1, GROUP_CONCURRENCY_MAX);
}

/** A schedule's name: 1-64 letters, digits, '_', '.' or '-' (it becomes part of keys and node names). */
export function checkScheduleName(name: unknown): string {
  if (typeof name !== 'string' || !/^[A-Za-z0-9_.-]{1,64}$/.test(name)) {
    throw new TypeError(`schedule name ${JSON.stringify(name)} is invalid: use 1-64 letters, digits, '_', '.' or '-'`);
  }
  return name;
}
