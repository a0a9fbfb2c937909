/**
 * The queue's configuration in `conf/`, as zkmq keeps it: one node per field,
 * readable and settable with any ZooKeeper client: `task_gc_lifetime`,
 * `task_gc_interval`, `failed_lifetime` and `max_deliveries` as decimal
 * numbers, `paused` as `true` / `false`, `dead_letter_queue` as a queue name
 * (empty for none), `filters` as JSON: filter name → ordered values, `events` as
 * `true` / `false`, `events_max_count` and `events_max_age` (ms) as decimal numbers, `group_concurrency` as
 * a decimal number (empty for none), `rate_limit` and `group_rate_limit` as JSON `{"max":n,"perMs":ms}` (empty
 * for none).
 * A missing node reads as its default (queues written before it existed).
 *
 * Every configure also sets the data of `conf` itself, in the same multi: its
 * version is what claims check (so no claim starts after a pause resolved),
 * and a data watch on it keeps each process's copy fresh without a read per claim.
 */
import { StoreLayoutError } from '../../model/errors.js';
import { applyConfigPatch, DEFAULT_QUEUE_CONFIG } from '../../model/config.js';
import { isZkError, ZkCode, type ZkOp, type ZkSession } from './client.js';
import type { QueuePaths } from './layout.js';
import type { QueueConfig } from '../../model/types.js';

const NODES = [
  'task_gc_lifetime',
  'task_gc_interval',
  'filters',
  'failed_lifetime',
  'paused',
  'max_deliveries',
  'dead_letter_queue',
  'events',
  'events_max_count',
  'events_max_age',
  'group_concurrency',
  'rate_limit',
  'keep_done',
  'keep_failed',
  'group_rate_limit',
] as const;
type Node = (typeof NODES)[number];

/**
 * What configuring needs of a queue. QueueContext has it; naming it here
 * keeps this module below queue.ts, which reads the configuration with it.
 */
export interface ConfiguredQueue {
  readonly paths: QueuePaths;
  exists(): Promise<boolean>;
  ensure(): Promise<void>;
}

/** A configuration as read, with the version of `conf` it was read at. */
export interface ConfRead {
  readonly config: QueueConfig;
  /** The data version of `conf` (read before its children, on the same session). */
  readonly version: number;
  /** Version per node, or null when the node does not exist. */
  readonly versions: readonly (number | null)[];
}

/** Reads `conf` (setting `watch` on its data when given) and then its nodes. */
export async function readConf(zk: ZkSession, confPath: string, watch?: () => void): Promise<ConfRead> {
  const [conf, reads] = await Promise.all([
    zk.get(confPath, watch),
    zk.getMany(NODES.map((node) => `${confPath}/${node}`)),
  ]);
  const text = (node: Node): string | null => {
    const read = reads[NODES.indexOf(node)];
    return read === null || read === undefined ? null : read.data.toString('utf8').trim();
  };
  const bad = (node: Node, value: string, what: string): never => {
    throw new StoreLayoutError(
      `${confPath}/${node} holds ${JSON.stringify(value)}, not ${what}; set it with kvmq config`,
    );
  };
  const number = (node: Node): number | undefined => {
    const value = text(node);
    if (value === null) return undefined;
    const n = Number(value);
    if (value === '' || !Number.isSafeInteger(n) || n < 0) return bad(node, value, 'a whole number');
    return n;
  };
  const flag = (node: 'paused' | 'events'): boolean | undefined => {
    const value = text(node);
    if (value === null) return undefined;
    return value === 'true' ? true : value === 'false' ? false : bad(node, value, 'true or false');
  };
  // A count, or '' for none (null).
  const keep = (node: 'keep_done' | 'keep_failed', key: 'keepDone' | 'keepFailed'): Partial<QueueConfig> => {
    const value = text(node);
    if (value === null) return {};
    return { [key]: value === '' ? null : number(node) };
  };
  const paused = flag('paused');
  const events = flag('events');
  let enums: QueueConfig['filterEnums'] | undefined;
  const filters = text('filters');
  if (filters !== null) {
    try {
      enums = JSON.parse(filters || '{}') as QueueConfig['filterEnums'];
    } catch {
      throw new StoreLayoutError(`${confPath}/filters does not hold JSON; set it with kvmq config`);
    }
  }
  const dlq = text('dead_letter_queue');
  const groups = text('group_concurrency');
  // A rate limit as JSON, or '' for none (null).
  const limit = (node: 'rate_limit' | 'group_rate_limit'): QueueConfig['rateLimit'] | undefined => {
    const value = text(node);
    if (value === null) return undefined;
    try {
      return value === '' ? null : (JSON.parse(value) as QueueConfig['rateLimit']);
    } catch {
      throw new StoreLayoutError(`${confPath}/${node} does not hold JSON; set it with kvmq config`);
    }
  };
  const rateLimit = limit('rate_limit');
  const groupRateLimit = limit('group_rate_limit');
  const config = applyConfigPatch(DEFAULT_QUEUE_CONFIG, {
    gcLifetimeMs: number('task_gc_lifetime'),
    gcIntervalMs: number('task_gc_interval'),
    failedLifetimeMs: number('failed_lifetime'),
    maxDeliveries: number('max_deliveries'),
    eventsMaxCount: number('events_max_count'),
    eventsMaxAgeMs: number('events_max_age'),
    ...(paused === undefined ? {} : { paused }),
    ...(events === undefined ? {} : { events }),
    ...(enums === undefined ? {} : { filterEnums: enums }),
    ...(dlq === null ? {} : { deadLetterQueue: dlq === '' ? null : dlq }),
    ...(groups === null ? {} : { groupConcurrency: groups === '' ? null : number('group_concurrency') }),
    ...(rateLimit === undefined ? {} : { rateLimit }),
    ...(groupRateLimit === undefined ? {} : { groupRateLimit }),
    ...keep('keep_done', 'keepDone'),
    ...keep('keep_failed', 'keepFailed'),
  });
  return { config, version: conf.stat.version, versions: reads.map((r) => (r == null ? null : r.version)) };
}

export async function readConfig(zk: ZkSession, q: ConfiguredQueue): Promise<QueueConfig> {
  if (!(await q.exists())) return DEFAULT_QUEUE_CONFIG;
  return (await readConf(zk, q.paths.conf)).config;
}

function values(config: QueueConfig): Record<Node, string> {
  return {
    task_gc_lifetime: String(config.gcLifetimeMs),
    task_gc_interval: String(config.gcIntervalMs),
    filters: JSON.stringify(config.filterEnums),
    failed_lifetime: String(config.failedLifetimeMs),
    paused: String(config.paused),
    max_deliveries: String(config.maxDeliveries),
    dead_letter_queue: config.deadLetterQueue ?? '',
    events: String(config.events),
    events_max_count: String(config.eventsMaxCount),
    events_max_age: String(config.eventsMaxAgeMs),
    group_concurrency: config.groupConcurrency === null ? '' : String(config.groupConcurrency),
    rate_limit: config.rateLimit === null ? '' : JSON.stringify(config.rateLimit),
    keep_done: config.keepDone === null ? '' : String(config.keepDone),
    keep_failed: config.keepFailed === null ? '' : String(config.keepFailed),
    group_rate_limit: config.groupRateLimit === null ? '' : JSON.stringify(config.groupRateLimit),
  };
}

/**
 * Applies a patch in one multi with version checks (retried if another writer
 * got in first). `created`: the queue did not exist before. A resume
 * touches every sub-queue node in the same multi, which wakes idle workers as an enqueue does.
 */
export async function writeConfig(
  zk: ZkSession,
  q: ConfiguredQueue,
  patch: Partial<QueueConfig>,
): Promise<{ config: QueueConfig; created: boolean }> {
  // A queue that exists (made by an enqueue, a worker or a configure) has its configuration, defaults or not.
  const existed = await q.exists();
  await q.ensure();
  for (;;) {
    const { config: old, version, versions } = await readConf(zk, q.paths.conf);
    const config = applyConfigPatch(old, patch);
    const data = values(config);
    const ops: ZkOp[] = [{ op: 'set', path: q.paths.conf, data: Buffer.alloc(0), version }];
    NODES.forEach((node, i) => {
      const path = `${q.paths.conf}/${node}`;
      const nodeVersion = versions[i];
      ops.push(
        nodeVersion === null || nodeVersion === undefined
          ? { op: 'create', path, data: Buffer.from(data[node]) }
          : { op: 'set', path, data: Buffer.from(data[node]), version: nodeVersion },
      );
    });
    const resumed = old.paused && !config.paused;
    if (resumed) {
      const { children } = await zk.children(q.paths.queue);
      for (const node of children) {
        ops.push({ op: 'set', path: `${q.paths.queue}/${node}`, data: Buffer.alloc(0), version: -1 });
      }
    }
    try {
      await zk.multi(ops);
      return { config, created: !existed };
    } catch (error) {
      if (!isZkError(error, ZkCode.BadVersion) && !isZkError(error, ZkCode.NodeExists)) {
        // A sub-queue removed by hand meanwhile: read again.
        if (!(resumed && isZkError(error, ZkCode.NoNode))) throw error;
      }
    }
  }
}
