import {
  checkBoolean,
  checkCount,
  checkFilterToken,
  checkKnownKeys,
  checkMs,
  checkPlainObject,
  checkQueueName,
} from './validate.js';
import { DAY, MINUTE, SECOND } from './time.js';
import { EVENTS_MAX_COUNT } from './events.js';
import { checkGroupConcurrency, checkRateLimit } from './scheduling.js';
import type { QueueConfig } from './types.js';

export const DEFAULT_QUEUE_CONFIG = {
  gcLifetimeMs: 5 * MINUTE,
  failedLifetimeMs: 7 * DAY,
  keepDone: null,
  keepFailed: null,
  gcIntervalMs: 30 * SECOND,
  filterEnums: {},
  paused: false,
  maxDeliveries: 10,
  deadLetterQueue: null,
  events: false,
  eventsMaxCount: EVENTS_MAX_COUNT,
  eventsMaxAgeMs: DAY,
  rateLimit: null,
  groupConcurrency: null,
  groupRateLimit: null,
} as const satisfies QueueConfig;

const CONFIG_KEYS = [
  'gcLifetimeMs',
  'failedLifetimeMs',
  'keepDone',
  'keepFailed',
  'gcIntervalMs',
  'filterEnums',
  'paused',
  'maxDeliveries',
  'deadLetterQueue',
  'events',
  'eventsMaxCount',
  'eventsMaxAgeMs',
  'rateLimit',
  'groupConcurrency',
  'groupRateLimit',
] as const;

/** Validates a partial configuration as given to `configure`; `queue` is the queue it is for. */
export function checkConfigPatch(value: unknown, queue: string): Partial<QueueConfig> {
  const patch = checkPlainObject('configuration', value);
  checkKnownKeys('configure', patch, CONFIG_KEYS);
  const checked: { -readonly [K in keyof QueueConfig]?: QueueConfig[K] } = {};
  if (patch.gcLifetimeMs !== undefined) checked.gcLifetimeMs = checkMs('gcLifetimeMs', patch.gcLifetimeMs);
  if (patch.failedLifetimeMs !== undefined) {
    checked.failedLifetimeMs = checkMs('failedLifetimeMs', patch.failedLifetimeMs);
  }
  if (patch.keepDone !== undefined) checked.keepDone = checkKeep('keepDone', patch.keepDone);
  if (patch.keepFailed !== undefined) checked.keepFailed = checkKeep('keepFailed', patch.keepFailed);
  if (patch.gcIntervalMs !== undefined) checked.gcIntervalMs = checkMs('gcIntervalMs', patch.gcIntervalMs, 1);
  if (patch.paused !== undefined) checked.paused = checkBoolean('paused', patch.paused);
  if (patch.maxDeliveries !== undefined) {
    checked.maxDeliveries = checkCount('maxDeliveries', patch.maxDeliveries, 0, 1_000_000);
  }
  if (patch.deadLetterQueue !== undefined) {
    const dlq = patch.deadLetterQueue === null ? null : checkQueueName(patch.deadLetterQueue);
    if (dlq === queue) throw new TypeError(`deadLetterQueue must be another queue than '${queue}' itself`);
    checked.deadLetterQueue = dlq;
  }
  if (patch.events !== undefined) checked.events = checkBoolean('events', patch.events);
  if (patch.eventsMaxCount !== undefined) {
    checked.eventsMaxCount = checkCount('eventsMaxCount', patch.eventsMaxCount, 1, 10_000_000);
  }
  if (patch.eventsMaxAgeMs !== undefined) {
    checked.eventsMaxAgeMs = checkMs('eventsMaxAgeMs', patch.eventsMaxAgeMs, 1);
  }
  if (patch.rateLimit !== undefined) checked.rateLimit = checkRateLimit(patch.rateLimit);
  if (patch.groupConcurrency !== undefined) checked.groupConcurrency = checkGroupConcurrency(patch.groupConcurrency);
  if (patch.groupRateLimit !== undefined) {
    checked.groupRateLimit = checkRateLimit(patch.groupRateLimit, 'groupRateLimit');
  }
  if (patch.filterEnums !== undefined) {
    const enums: [string, readonly string[]][] = [];
    for (const [name, values] of Object.entries(checkPlainObject('filterEnums', patch.filterEnums))) {
      checkFilterToken('name', name);
      if (!Array.isArray(values)) throw new TypeError(`filterEnums.${name} must be an array of values, lowest first`);
      const list = values.map((v) => checkFilterToken('value', v));
      if (new Set(list).size !== list.length) throw new TypeError(`filterEnums.${name} lists a value twice`);
      enums.push([name, list]);
    }
    checked.filterEnums = Object.fromEntries(enums);
  }
  return checked;
}

function checkKeep(name: string, value: unknown): number | null {
  return value === null ? null : checkCount(name, value, 0, 1_000_000_000);
}

/** Merges a patch; filter enums merge per name, and an empty list removes a filter. */
export function applyConfigPatch(config: QueueConfig, patch: Partial<QueueConfig>): QueueConfig {
  const merged = { ...config.filterEnums, ...patch.filterEnums };
  const filterEnums = Object.fromEntries(Object.entries(merged).filter(([, values]) => values.length > 0));
  return {
    gcLifetimeMs: patch.gcLifetimeMs ?? config.gcLifetimeMs,
    failedLifetimeMs: patch.failedLifetimeMs ?? config.failedLifetimeMs,
    keepDone: patch.keepDone === undefined ? config.keepDone : patch.keepDone,
    keepFailed: patch.keepFailed === undefined ? config.keepFailed : patch.keepFailed,
    gcIntervalMs: patch.gcIntervalMs ?? config.gcIntervalMs,
    filterEnums,
    paused: patch.paused ?? config.paused,
    maxDeliveries: patch.maxDeliveries ?? config.maxDeliveries,
    deadLetterQueue: patch.deadLetterQueue === undefined ? config.deadLetterQueue : patch.deadLetterQueue,
    events: patch.events ?? config.events,
    eventsMaxCount: patch.eventsMaxCount ?? config.eventsMaxCount,
    eventsMaxAgeMs: patch.eventsMaxAgeMs ?? config.eventsMaxAgeMs,
    rateLimit: patch.rateLimit === undefined ? config.rateLimit : patch.rateLimit,
    groupConcurrency: patch.groupConcurrency === undefined ? config.groupConcurrency : patch.groupConcurrency,
    groupRateLimit: patch.groupRateLimit === undefined ? config.groupRateLimit : patch.groupRateLimit,
  };
}

/**
 * A stored configuration read back: fields an older kvmq did not write take
 * their defaults, so configurations written before a field existed stay valid.
 */
export function withConfigDefaults(stored: Partial<QueueConfig>): QueueConfig {
  return applyConfigPatch(DEFAULT_QUEUE_CONFIG, stored);
}
