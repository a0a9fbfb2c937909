/**
 * A queue's configuration, in its `conf` hash (zkmq keeps it in the store
 * too): task_gc_lifetime and task_gc_interval in ms, filter_enums as JSON.
 */
import { StoreLayoutError } from '../errors.js';
import { applyConfigPatch, DEFAULT_QUEUE_CONFIG } from '../model/config.js';
import { queueKey } from './keys.js';
import { SCRIPTS } from './scripts.generated.js';
import type { Scripts } from './scripts.js';
import type { QueueConfig } from '../model/types.js';

const FIELDS = ['task_gc_lifetime', 'task_gc_interval', 'filter_enums'] as const;

type RawConfig = readonly [string, string, string];

async function readRaw(scripts: Scripts, prefix: string, queue: string): Promise<RawConfig> {
  const [lifetime, interval, enums] = await scripts.call((redis) =>
    redis.hmget(queueKey(prefix, queue, 'conf'), ...FIELDS),
  );
  return [lifetime ?? '', interval ?? '', enums ?? ''];
}

function parse(raw: RawConfig, key: string): QueueConfig {
  const [lifetime, interval, enums] = raw;
  const patch: { -readonly [K in keyof QueueConfig]?: QueueConfig[K] } = {};
  const bad = (field: string): never => {
    throw new StoreLayoutError(`${key} field ${field} is not kvmq's; fix or delete it (kvmq config rewrites it)`);
  };
  if (lifetime !== '') patch.gcLifetimeMs = Number.isSafeInteger(Number(lifetime)) ? Number(lifetime) : bad(FIELDS[0]);
  if (interval !== '') patch.gcIntervalMs = Number.isSafeInteger(Number(interval)) ? Number(interval) : bad(FIELDS[1]);
  if (enums !== '') {
    try {
      patch.filterEnums = JSON.parse(enums) as QueueConfig['filterEnums'];
    } catch {
      bad(FIELDS[2]);
    }
  }
  return applyConfigPatch(DEFAULT_QUEUE_CONFIG, patch);
}

export async function readConfig(scripts: Scripts, prefix: string, queue: string): Promise<QueueConfig> {
  return parse(await readRaw(scripts, prefix, queue), queueKey(prefix, queue, 'conf'));
}

/** Merges the patch into what is stored, written only if nobody changed it meanwhile (else read again). */
export async function writeConfig(
  scripts: Scripts,
  prefix: string,
  queue: string,
  patch: Partial<QueueConfig>,
): Promise<QueueConfig> {
  for (;;) {
    const raw = await readRaw(scripts, prefix, queue);
    const next = applyConfigPatch(parse(raw, queueKey(prefix, queue, 'conf')), patch);
    const written = await scripts.run(SCRIPTS.configure, queue, [
      ...raw,
      next.gcLifetimeMs,
      next.gcIntervalMs,
      JSON.stringify(next.filterEnums),
    ]);
    if (written === 1) return next;
  }
}
