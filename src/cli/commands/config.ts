/** `kvmq config`: shows or changes a queue's stored configuration (GC, failures, pause, limits, filter enums). */
import type { QueueConfig } from '../../index.js';
import { expectPositionals, parseCommandLine, parseKeyValue, parseWholeNumber } from '../args.js';
import type { Command } from '../command.js';
import { DURATION_HELP, parseDuration } from '../duration.js';
import { EXIT_OK, UsageError } from '../errors.js';
import { commandUsage } from '../help.js';
import { printJson, printLine } from '../output.js';
import { formatGroupConcurrency, formatRateLimit, parseGroupConcurrency, parseRateLimit } from '../scheduling-args.js';
import { withClient } from '../store.js';
import { didYouMean } from '../suggest.js';

type NumberKey =
  'gcLifetimeMs' | 'failedLifetimeMs' | 'gcIntervalMs' | 'maxDeliveries' | 'eventsMaxCount' | 'eventsMaxAgeMs';
// The zkmq seed's names (its conf/ nodes) are accepted too.
const NUMBER_KEYS: Readonly<Record<string, NumberKey>> = {
  gc_lifetime_ms: 'gcLifetimeMs',
  task_gc_lifetime: 'gcLifetimeMs',
  failed_lifetime_ms: 'failedLifetimeMs',
  gc_interval_ms: 'gcIntervalMs',
  task_gc_interval: 'gcIntervalMs',
  max_deliveries: 'maxDeliveries',
  events_max_count: 'eventsMaxCount',
  events_max_age_ms: 'eventsMaxAgeMs',
};
// Zero means nothing for these: GC cannot run every 0 ms, and a queue keeps at least one event for 1 ms.
const AT_LEAST_ONE: ReadonlySet<NumberKey> = new Set(['gcIntervalMs', 'eventsMaxCount', 'eventsMaxAgeMs']);
const FILTER_PREFIX = 'filter.';
const OTHER_KEYS = [
  'paused',
  'events',
  'dead_letter_queue',
  'rate_limit',
  'group_concurrency',
  'group_rate_limit',
  'keep_done',
  'keep_failed',
];

export const config: Command = {
  name: 'config',
  summary: "show or change a queue's configuration",
  usage: commandUsage(
    'config <queue> [key=value...]',
    "Without key=value, prints the queue's configuration. Keys:\n" +
      '  gc_lifetime_ms=T        finished messages older than T are removed by GC (alias task_gc_lifetime)\n' +
      '  failed_lifetime_ms=T    failed messages older than T are removed by GC (default 7 days)\n' +
      '  keep_done=N             GC also removes successes beyond the newest N; none: by age only (default);\n' +
      '                          0 on SQLite and PostgreSQL: a plain success goes at its finish\n' +
      '  keep_failed=N           GC also removes failed messages beyond the newest N; none: by age only\n' +
      '  gc_interval_ms=T        GC runs at most every T (alias task_gc_interval)\n' +
      '  max_deliveries=N        a message that loses its lock N times fails (0: never; default 10)\n' +
      '  dead_letter_queue=Q     failed messages move to queue Q; empty for none\n' +
      '  paused=true|false       workers claim nothing while true (see kvmq pause)\n' +
      '  events=true|false       record queue events (see kvmq events; default false)\n' +
      '  events_max_count=N      keep at most the N newest events (default 10000)\n' +
      '  events_max_age_ms=T     events older than T are trimmed (default 1 day)\n' +
      '  rate_limit=MAX/PERIOD   at most MAX claims per PERIOD across all workers, e.g. 100/1s, 5/250ms,\n' +
      '                          1000/1m, 50000/1d; none removes it (default none)\n' +
      '  group_concurrency=N     at most N messages of one group (enqueue --group) run at once; none: no\n' +
      '                          limit (default none)\n' +
      '  group_rate_limit=MAX/PERIOD  at most MAX messages of one group start per PERIOD across all workers,\n' +
      '                          spaced PERIOD/MAX apart; none removes it (default none)\n' +
      '  filter.NAME=v1,v2,...   the values of filter NAME, lowest first; empty removes the filter',
    [DURATION_HELP],
  ),

  async run(argv) {
    const { values, positionals } = parseCommandLine(argv, {});
    expectPositionals(positionals, 1, Infinity, '<queue> [key=value...]');
    const [queue = '', ...assignments] = positionals;
    const patch = parsePatch(assignments);
    return withClient(values.store, async (client) => {
      const result = assignments.length === 0 ? await client.config(queue) : await client.configure(queue, patch);
      if (values.json === true) printJson(result);
      else printLine(configText(result));
      return EXIT_OK;
    });
  },
};

function parsePatch(assignments: readonly string[]): Partial<QueueConfig> {
  const numbers: { -readonly [K in NumberKey]?: number } = {};
  const others: {
    paused?: boolean;
    events?: boolean;
    deadLetterQueue?: string | null;
    rateLimit?: QueueConfig['rateLimit'];
    groupConcurrency?: number | null;
    groupRateLimit?: QueueConfig['groupRateLimit'];
    keepDone?: number | null;
    keepFailed?: number | null;
  } = {};
  const filterEnums = new Map<string, string[]>();
  for (const assignment of assignments) {
    const [key, value] = parseKeyValue('a setting', assignment);
    const numberKey = Object.hasOwn(NUMBER_KEYS, key) ? NUMBER_KEYS[key] : undefined;
    if (numberKey !== undefined) {
      // A lifetime of 0 (GC finished messages at once) is fine.
      const min = AT_LEAST_ONE.has(numberKey) ? 1 : 0;
      numbers[numberKey] = numberKey.endsWith('Ms')
        ? parseDuration(key, value, min)
        : parseWholeNumber(key, value, min);
    } else if (key === 'paused' || key === 'events') {
      if (value !== 'true' && value !== 'false') throw new UsageError(`${key} must be true or false, got '${value}'`);
      others[key] = value === 'true';
    } else if (key === 'dead_letter_queue') {
      others.deadLetterQueue = value === '' ? null : value;
    } else if (key === 'rate_limit') {
      others.rateLimit = parseRateLimit(value);
    } else if (key === 'group_concurrency') {
      others.groupConcurrency = parseGroupConcurrency(value);
    } else if (key === 'group_rate_limit') {
      others.groupRateLimit = parseRateLimit(value, key);
    } else if (key === 'keep_done' || key === 'keep_failed') {
      others[key === 'keep_done' ? 'keepDone' : 'keepFailed'] =
        value === 'none' ? null : parseWholeNumber(key, value, 0);
    } else if (key.startsWith(FILTER_PREFIX) && key.length > FILTER_PREFIX.length) {
      filterEnums.set(key.slice(FILTER_PREFIX.length), value === '' ? [] : value.split(','));
    } else {
      throw new UsageError(
        `unknown setting '${key}'${didYouMean(key, [...Object.keys(NUMBER_KEYS), ...OTHER_KEYS])}; known: gc_lifetime_ms, failed_lifetime_ms, gc_interval_ms, max_deliveries, ` +
          'dead_letter_queue, paused, events, events_max_count, events_max_age_ms, rate_limit, ' +
          'group_concurrency, group_rate_limit, keep_done, keep_failed, filter.NAME ' +
          '(and the zkmq names task_gc_lifetime, task_gc_interval)',
      );
    }
  }
  const patch = { ...numbers, ...others };
  return filterEnums.size === 0 ? patch : { ...patch, filterEnums: Object.fromEntries(filterEnums) };
}

/** `key=value` lines, the form `kvmq config` takes: `kvmq config b $(kvmq config a)` copies a's configuration. */
function configText(c: QueueConfig): string {
  return [
    `gc_lifetime_ms=${c.gcLifetimeMs}`,
    `failed_lifetime_ms=${c.failedLifetimeMs}`,
    `gc_interval_ms=${c.gcIntervalMs}`,
    `max_deliveries=${c.maxDeliveries}`,
    `dead_letter_queue=${c.deadLetterQueue ?? ''}`,
    `paused=${String(c.paused)}`,
    `events=${String(c.events)}`,
    `events_max_count=${c.eventsMaxCount}`,
    `events_max_age_ms=${c.eventsMaxAgeMs}`,
    `rate_limit=${formatRateLimit(c.rateLimit)}`,
    `group_concurrency=${formatGroupConcurrency(c.groupConcurrency)}`,
    `group_rate_limit=${formatRateLimit(c.groupRateLimit)}`,
    `keep_done=${c.keepDone ?? 'none'}`,
    `keep_failed=${c.keepFailed ?? 'none'}`,
    ...Object.entries(c.filterEnums).map(([name, list]) => `filter.${name}=${list.join(',')}`),
  ].join('\n');
}
