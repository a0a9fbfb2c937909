/**
 * zkmq's filters: a message carries `name=value` pairs, each value taken from
 * an ordered enum in the queue's configuration. A worker declares its own
 * values and, per filter, a method: `absolute` (equal) or `at_least` (the
 * worker's value ranks at or above the message's).
 *
 * Stores index pending messages by their *filter class*: the canonical
 * string of all their filter pairs. A worker asks only for the classes it
 * accepts, so a claim never reads a message it cannot take.
 */
import { FilterError } from './errors.js';
import { checkFilterToken, checkPlainObject, own } from './validate.js';
import type { FilterValues, QueueConfig } from './types.js';

export type FilterMethod = 'absolute' | 'at_least';

export interface WorkerFilter {
  readonly value: string;
  /** @defaultValue 'absolute' */
  readonly method?: FilterMethod;
}

/** A worker's filters: a value (absolute), or a value and a method. */
export type WorkerFilters = Readonly<Record<string, string | WorkerFilter>>;

/** Which filter classes a worker accepts; null means any class. */
export type ClassMatcher = ((filterClass: string) => boolean) | null;

/** The canonical class of a message's filters: sorted `name=value` joined by `&`, '' for none. */
export function filterClass(filters: FilterValues): string {
  return Object.keys(filters)
    .sort()
    .map((name) => `${name}=${own(filters, name) ?? ''}`)
    .join('&');
}

export function parseFilterClass(key: string): Record<string, string> {
  if (key === '') return {};
  return Object.fromEntries(
    key.split('&').map((pair) => {
      const eq = pair.indexOf('=');
      return [pair.slice(0, eq), pair.slice(eq + 1)];
    }),
  );
}

/** Checks a message's filters against the queue's enums: every name declared, every value in its enum. */
export function checkMessageFilters(queue: string, value: unknown, config: QueueConfig): FilterValues {
  const filters = checkPlainObject('filters', value);
  const checked: [string, string][] = [];
  for (const [name, raw] of Object.entries(filters)) {
    checkFilterToken('name', name);
    const filterValue = checkFilterToken('value', raw);
    const allowed = own(config.filterEnums, name);
    if (allowed === undefined) {
      throw new FilterError(
        `queue '${queue}' has no filter '${name}'; declare its values first, lowest first, e.g. ` +
          `kvmq config ${queue} filter.${name}=low,standard,high`,
      );
    }
    if (!allowed.includes(filterValue)) {
      throw new FilterError(
        `filter ${name}=${filterValue} is not allowed on queue '${queue}'; allowed values are ${allowed.join(', ')}`,
      );
    }
    checked.push([name, filterValue]);
  }
  return Object.fromEntries(checked);
}

/** Normalises a worker's `filters` option; throws a TypeError on a malformed one. */
export function checkWorkerFilters(value: unknown): Readonly<Record<string, Required<WorkerFilter>>> {
  const filters = checkPlainObject('filters', value);
  const checked: [string, Required<WorkerFilter>][] = [];
  for (const [name, spec] of Object.entries(filters)) {
    checkFilterToken('name', name);
    const filter = typeof spec === 'string' ? { value: spec } : checkPlainObject(`filters.${name}`, spec);
    const method = filter.method ?? 'absolute';
    if (method !== 'absolute' && method !== 'at_least') {
      throw new TypeError(`filters.${name}.method must be 'absolute' or 'at_least', got ${JSON.stringify(method)}`);
    }
    checked.push([name, { value: checkFilterToken('value', filter.value), method }]);
  }
  return Object.fromEntries(checked);
}

/**
 * The classes a worker accepts, given the queue's enums. A message filter the
 * worker does not declare excludes the message; a worker filter the message
 * does not carry constrains nothing.
 */
export function classMatcher(
  queue: string,
  filters: Readonly<Record<string, Required<WorkerFilter>>>,
  config: QueueConfig,
): (filterClass: string) => boolean {
  for (const [name, { value }] of Object.entries(filters)) {
    const allowed = own(config.filterEnums, name);
    if (allowed === undefined || !allowed.includes(value)) {
      throw new FilterError(
        `worker filter ${name}=${value} is not in queue '${queue}' configuration` +
          (allowed === undefined
            ? `; declare it with kvmq config ${queue} filter.${name}=...`
            : `: ${allowed.join(', ')}`),
      );
    }
  }
  return (key) => {
    for (const [name, messageValue] of Object.entries(parseFilterClass(key))) {
      const mine = own(filters, name);
      if (mine === undefined) return false;
      if (mine.method === 'absolute') {
        if (mine.value !== messageValue) return false;
      } else {
        const ranks = own(config.filterEnums, name) ?? [];
        const messageRank = ranks.indexOf(messageValue);
        if (messageRank < 0 || ranks.indexOf(mine.value) < messageRank) return false;
      }
    }
    return true;
  };
}
