import { checkFilterToken, checkKnownKeys, checkMs, checkPlainObject } from './validate.js';
import { MINUTE, SECOND } from './time.js';
import type { QueueConfig } from './types.js';

export const DEFAULT_QUEUE_CONFIG = {
  gcLifetimeMs: 5 * MINUTE,
  gcIntervalMs: 30 * SECOND,
  filterEnums: {},
} as const satisfies QueueConfig;

const CONFIG_KEYS = ['gcLifetimeMs', 'gcIntervalMs', 'filterEnums'] as const;

/** Validates a partial configuration as given to `configure`. */
export function checkConfigPatch(value: unknown): Partial<QueueConfig> {
  const patch = checkPlainObject('configuration', value);
  checkKnownKeys('configure', patch, CONFIG_KEYS);
  const checked: { -readonly [K in keyof QueueConfig]?: QueueConfig[K] } = {};
  if (patch.gcLifetimeMs !== undefined) checked.gcLifetimeMs = checkMs('gcLifetimeMs', patch.gcLifetimeMs);
  if (patch.gcIntervalMs !== undefined) checked.gcIntervalMs = checkMs('gcIntervalMs', patch.gcIntervalMs, 1);
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

/** Merges a patch; filter enums merge per name, and an empty list removes a filter. */
export function applyConfigPatch(config: QueueConfig, patch: Partial<QueueConfig>): QueueConfig {
  const merged = { ...config.filterEnums, ...patch.filterEnums };
  const filterEnums = Object.fromEntries(Object.entries(merged).filter(([, values]) => values.length > 0));
  return {
    gcLifetimeMs: patch.gcLifetimeMs ?? config.gcLifetimeMs,
    gcIntervalMs: patch.gcIntervalMs ?? config.gcIntervalMs,
    filterEnums,
  };
}
