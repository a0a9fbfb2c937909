/**
 * A queue's configuration, in its `conf` hash (zkmq keeps it in the store
 * too): task_gc_lifetime, task_gc_interval and failed_lifetime in ms,
 * filter_enums as JSON, paused ('1' or '0'), max_deliveries, dead_letter_queue
 * ('' for none), events ('1' or '0'), events_max_count, events_max_age (ms), rate_limit ('<max>/<perMs>',
 * '' for none), group_concurrency ('' for none), keep_done and keep_failed ('' for none), group_rate_limit
 * ('<max>/<perMs>', '' for none). Fields an older kvmq
 * did not write read as their defaults.
 */
import { StoreLayoutError } from '../../model/errors.js';
import { applyConfigPatch, withConfigDefaults } from '../../model/config.js';
import { queueKey } from './keys.js';
import { SCRIPTS } from './scripts.generated.js';
import type { Scripts } from './scripts.js';
import type { Configured } from '../contract/contract.js';
import type { QueueConfig } from '../../model/types.js';

const FIELDS = [
  'task_gc_lifetime',
  'task_gc_interval',
  'filter_enums',
  'failed_lifetime',
  'paused',
  'max_deliveries',
  'dead_letter_queue',
  'events',
  'events_max_count',
  'events_max_age',
  'rate_limit',
  'group_concurrency',
  'keep_done',
  'keep_failed',
  'group_rate_limit',
] as const;

type RawConfig = readonly string[];

async function readRaw(scripts: Scripts, prefix: string, queue: string): Promise<RawConfig> {
  const values = await scripts.call((redis) => redis.hmget(queueKey(prefix, queue, 'conf'), ...FIELDS));
  return values.map((value) => value ?? '');
}

function parse(raw: RawConfig, key: string): QueueConfig {
  const [
    lifetime,
    interval,
    enums,
    failedLifetime,
    paused,
    maxDeliveries,
    deadLetterQueue,
    events,
    maxCount,
    maxAge,
    rateLimit,
    groupConcurrency,
    keepDone,
    keepFailed,
    groupRateLimit,
  ] = raw;
  const patch: { -readonly [K in keyof QueueConfig]?: QueueConfig[K] } = {};
  const bad = (field: string): never => {
    throw new StoreLayoutError(`${key} field ${field} is not kvmq's; fix or delete it (kvmq config rewrites it)`);
  };
  const integer = (value: string | undefined, field: string): number | undefined => {
    if (value === undefined || value === '') return undefined;
    return Number.isSafeInteger(Number(value)) ? Number(value) : bad(field);
  };
  patch.gcLifetimeMs = integer(lifetime, 'task_gc_lifetime');
  patch.gcIntervalMs = integer(interval, 'task_gc_interval');
  patch.failedLifetimeMs = integer(failedLifetime, 'failed_lifetime');
  patch.maxDeliveries = integer(maxDeliveries, 'max_deliveries');
  patch.eventsMaxCount = integer(maxCount, 'events_max_count');
  patch.eventsMaxAgeMs = integer(maxAge, 'events_max_age');
  if (enums !== undefined && enums !== '') {
    try {
      patch.filterEnums = JSON.parse(enums) as QueueConfig['filterEnums'];
    } catch {
      bad('filter_enums');
    }
  }
  if (paused !== undefined && paused !== '') patch.paused = paused === '1';
  if (events !== undefined && events !== '') patch.events = events === '1';
  if (deadLetterQueue !== undefined && deadLetterQueue !== '') patch.deadLetterQueue = deadLetterQueue;
  patch.groupConcurrency = integer(groupConcurrency, 'group_concurrency');
  patch.keepDone = integer(keepDone, 'keep_done');
  patch.keepFailed = integer(keepFailed, 'keep_failed');
  const limit = (value: string | undefined, field: string): QueueConfig['rateLimit'] | undefined => {
    if (value === undefined || value === '') return undefined;
    const [max, perMs] = value.split('/').map((part) => integer(part, field));
    return max === undefined || perMs === undefined ? bad(field) : { max, perMs };
  };
  patch.rateLimit = limit(rateLimit, 'rate_limit');
  patch.groupRateLimit = limit(groupRateLimit, 'group_rate_limit');
  return withConfigDefaults(patch);
}

export async function readConfig(scripts: Scripts, prefix: string, queue: string): Promise<QueueConfig> {
  return parse(await readRaw(scripts, prefix, queue), queueKey(prefix, queue, 'conf'));
}

/**
 * Merges the patch into what is stored, written only if nobody changed it
 * meanwhile (else read again). On a cluster a dead-letter queue is refused: a
 * script cannot move a message between two queues' hash slots atomically.
 */
export async function writeConfig(
  scripts: Scripts,
  prefix: string,
  queue: string,
  patch: Partial<QueueConfig>,
  cluster: boolean,
): Promise<Configured> {
  if (cluster && patch.deadLetterQueue !== undefined && patch.deadLetterQueue !== null) {
    throw new TypeError(
      `deadLetterQueue is not available on a Redis Cluster: queues '${queue}' and '${patch.deadLetterQueue}' ` +
        'live in different hash slots, so no script can move a message between them atomically',
    );
  }
  for (;;) {
    const raw = await readRaw(scripts, prefix, queue);
    const next = applyConfigPatch(parse(raw, queueKey(prefix, queue, 'conf')), patch);
    const written = await scripts.run(SCRIPTS.configure, queue, [
      ...raw,
      next.gcLifetimeMs,
      next.gcIntervalMs,
      JSON.stringify(next.filterEnums),
      next.failedLifetimeMs,
      next.paused ? '1' : '0',
      next.maxDeliveries,
      next.deadLetterQueue ?? '',
      next.events ? '1' : '0',
      next.eventsMaxCount,
      next.eventsMaxAgeMs,
      next.rateLimit === null ? '' : `${next.rateLimit.max}/${next.rateLimit.perMs}`,
      next.groupConcurrency ?? '',
      next.keepDone ?? '',
      next.keepFailed ?? '',
      next.groupRateLimit === null ? '' : `${next.groupRateLimit.max}/${next.groupRateLimit.perMs}`,
    ]);
    if (written !== 0) return { config: next, created: written === 2 };
  }
}
