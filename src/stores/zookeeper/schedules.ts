/**
 * Repeatable schedules: `/schedules/<name>` holds `{"body","nextAt"}` (the body opaque, made by src/schedule/).
 * Firing is a compare-and-set on that node's data version: the read body and nextAt must be what the caller
 * expects, and the `set` of the new nextAt, with the version read, commits in the first multi of the enqueue of
 * the slot's messages (enqueue.ts, its guard): the same code path as `enqueue`. Of processes firing the same slot,
 * only one set commits; the others write nothing and get null.
 */
import { isZkError, ZkCode, type ZkSession } from './client.js';
import { enqueueGuarded } from './enqueue.js';
import type { StoreContext } from './context.js';
import type { QueueContext } from './queue.js';
import type { NewMessage, StoredSchedule } from '../contract/contract.js';
import type { EnqueueResult } from '../../model/types.js';

/** A schedule's name as a node name: '.' and '..' are not allowed in ZooKeeper paths ('%' is never in a name). */
function schedulePath(q: QueueContext, name: string): string {
  return `${q.paths.schedules}/${name === '.' || name === '..' ? `%${name}` : name}`;
}

function nameOfNode(node: string): string {
  return node === '%.' || node === '%..' ? node.slice(1) : node;
}

function encode(body: string, nextAt: number): Buffer {
  return Buffer.from(JSON.stringify({ body, nextAt }));
}

function decode(name: string, data: Buffer): StoredSchedule {
  const parsed = JSON.parse(data.toString('utf8')) as { body: string; nextAt: number };
  return { name, body: parsed.body, nextAt: parsed.nextAt };
}

export async function putSchedule(zk: ZkSession, q: QueueContext, schedule: StoredSchedule): Promise<boolean> {
  await q.ensure();
  const path = schedulePath(q, schedule.name);
  const data = encode(schedule.body, schedule.nextAt);
  for (;;) {
    try {
      await zk.create(path, data);
      return true;
    } catch (error) {
      if (!isZkError(error, ZkCode.NodeExists)) throw error;
    }
    try {
      await zk.set(path, data, -1);
      return false;
    } catch (error) {
      // Removed between the two: create it again.
      if (!isZkError(error, ZkCode.NoNode)) throw error;
    }
  }
}

export async function listSchedules(zk: ZkSession, q: QueueContext): Promise<StoredSchedule[]> {
  if (!(await q.exists())) return [];
  let children: string[];
  try {
    children = (await zk.children(q.paths.schedules)).children;
  } catch (error) {
    if (isZkError(error, ZkCode.NoNode)) return [];
    throw error;
  }
  const reads = await zk.getMany(children.map((node) => `${q.paths.schedules}/${node}`));
  const out: StoredSchedule[] = [];
  children.forEach((node, i) => {
    const read = reads[i];
    if (read != null) out.push(decode(nameOfNode(node), read.data));
  });
  return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

export async function removeSchedule(zk: ZkSession, q: QueueContext, name: string): Promise<boolean> {
  if (!(await q.exists())) return false;
  try {
    await zk.remove(schedulePath(q, name), -1);
    return true;
  } catch (error) {
    if (isZkError(error, ZkCode.NoNode)) return false;
    throw error;
  }
}

export async function fireSchedule(
  ctx: StoreContext,
  q: QueueContext,
  expected: StoredSchedule,
  nextAt: number,
  messages: readonly NewMessage[],
): Promise<EnqueueResult[] | null> {
  await q.ensure();
  const path = schedulePath(q, expected.name);
  let read;
  try {
    read = await ctx.zk.get(path);
  } catch (error) {
    if (isZkError(error, ZkCode.NoNode)) return null;
    throw error;
  }
  const stored = decode(expected.name, read.data);
  if (stored.body !== expected.body || stored.nextAt !== expected.nextAt) return null;
  const guard = {
    ops: [{ op: 'set' as const, path, data: encode(stored.body, nextAt), version: read.stat.version }],
    committed: false,
  };
  return enqueueGuarded(ctx, q, messages, guard);
}
