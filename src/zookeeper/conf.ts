/**
 * The queue's configuration in `conf/`, as zkmq keeps it: `task_gc_lifetime`
 * and `task_gc_interval` as decimal milliseconds (readable and settable with
 * any ZooKeeper client), and `filters` as JSON: filter name → ordered values.
 */
import { StoreLayoutError } from '../errors.js';
import { applyConfigPatch, DEFAULT_QUEUE_CONFIG } from '../model/config.js';
import { isZkError, ZkCode, type ZkOp, type ZkSession } from './client.js';
import type { QueueContext } from './queue.js';
import type { QueueConfig } from '../model/types.js';

const NODES = ['task_gc_lifetime', 'task_gc_interval', 'filters'] as const;

interface Read {
  readonly config: QueueConfig;
  /** Version per node, or null when the node does not exist. */
  readonly versions: (number | null)[];
}

async function read(zk: ZkSession, q: QueueContext): Promise<Read> {
  const reads = await Promise.all(
    NODES.map(async (node) => {
      try {
        return await zk.get(`${q.paths.conf}/${node}`);
      } catch (error) {
        if (isZkError(error, ZkCode.NoNode)) return null;
        throw error;
      }
    }),
  );
  const [lifetime, interval, filters] = reads;
  const number = (node: string, value: { data: Buffer } | null | undefined, fallback: number): number => {
    if (value == null) return fallback;
    const text = value.data.toString('utf8').trim();
    const n = Number(text);
    if (text === '' || !Number.isInteger(n) || n < 0) {
      throw new StoreLayoutError(
        `${q.paths.conf}/${node} holds ${JSON.stringify(text)}, not whole milliseconds; set it with kvmq config`,
      );
    }
    return n;
  };
  let enums: QueueConfig['filterEnums'] = {};
  if (filters != null) {
    try {
      enums = JSON.parse(filters.data.toString('utf8') || '{}') as QueueConfig['filterEnums'];
    } catch {
      throw new StoreLayoutError(`${q.paths.conf}/filters does not hold JSON; set it with kvmq config`);
    }
  }
  const config = applyConfigPatch(DEFAULT_QUEUE_CONFIG, {
    gcLifetimeMs: number('task_gc_lifetime', lifetime, DEFAULT_QUEUE_CONFIG.gcLifetimeMs),
    gcIntervalMs: number('task_gc_interval', interval, DEFAULT_QUEUE_CONFIG.gcIntervalMs),
    filterEnums: enums,
  });
  return { config, versions: reads.map((r) => (r === null ? null : r.stat.version)) };
}

export async function readConfig(zk: ZkSession, q: QueueContext): Promise<QueueConfig> {
  if (!(await q.exists())) return DEFAULT_QUEUE_CONFIG;
  return (await read(zk, q)).config;
}

/** Applies a patch in one multi with version checks; retried if another writer got in first. */
export async function writeConfig(zk: ZkSession, q: QueueContext, patch: Partial<QueueConfig>): Promise<QueueConfig> {
  await q.ensure();
  for (;;) {
    const { config: old, versions } = await read(zk, q);
    const config = applyConfigPatch(old, patch);
    const values = [String(config.gcLifetimeMs), String(config.gcIntervalMs), JSON.stringify(config.filterEnums)];
    const ops: ZkOp[] = NODES.map((node, i): ZkOp => {
      const path = `${q.paths.conf}/${node}`;
      const data = Buffer.from(values[i] ?? '');
      const version = versions[i];
      return version === null || version === undefined
        ? { op: 'create', path, data }
        : { op: 'set', path, data, version };
    });
    try {
      await zk.multi(ops);
      return config;
    } catch (error) {
      if (!isZkError(error, ZkCode.BadVersion) && !isZkError(error, ZkCode.NodeExists)) throw error;
    }
  }
}
