/**
 * Reading flows on etcd: a message's children (job.children()) and the whole tree of its flow (getFlow), from the
 * links each record keeps (record.ts FlowFields). The tree is read a level at a time, each level in shared reads.
 */
import { FLOW_MAX_NODES, type FlowNode } from '../../model/flow.js';
import { readLevels } from '../contract/flow-levels.js';
import { QueueKeys } from './keys.js';
import { readRecord, statusOf } from './inspect.js';
import { getMany } from './txn-batch.js';
import type { FlowLink, MessageRecord } from './record.js';
import type { Kv } from './kv.js';
import type { MessageStatus } from '../../model/types.js';

interface NodeRead {
  readonly record: MessageRecord;
  readonly status: MessageStatus;
}

/** The records of messages (queue, id), in order; null for one that is gone. */
async function readNodes(kv: Kv, root: string, links: readonly FlowLink[]): Promise<(NodeRead | null)[]> {
  const keys = links.map(([queue]) => new QueueKeys(root, queue));
  const items = await getMany(
    kv,
    links.map(([, id], k) => (keys[k] as QueueKeys).record(id)),
  );
  const now = Date.now();
  return links.map(([, id], k) => {
    const item = items[k];
    if (item == null) return null;
    const record = readRecord(item);
    if (record.phase === 'staged') return null;
    return { record, status: statusOf(keys[k] as QueueKeys, id, record, now) };
  });
}

/** A message's children's statuses, in the order they were written (those gone left out). */
export async function flowChildren(kv: Kv, root: string, queue: string, id: string): Promise<MessageStatus[]> {
  const [node] = await readNodes(kv, root, [[queue, id]]);
  if (node == null) return [];
  const children = await readNodes(kv, root, node.record.flow?.children ?? []);
  return children.flatMap((child) => (child === null ? [] : [child.status]));
}

/** The tree of the flow the message belongs to, from its root (a message in none: itself alone); null if gone. */
export async function flowTree(kv: Kv, root: string, queue: string, id: string): Promise<FlowNode | null> {
  let [top] = await readNodes(kv, root, [[queue, id]]);
  if (top == null) return null;
  for (let depth = 0; top.record.flow?.parent !== undefined && depth < FLOW_MAX_NODES; depth++) {
    const [up] = await readNodes(kv, root, [top.record.flow.parent]);
    // The parent was removed: its children are the tree's top.
    if (up == null) break;
    top = up;
  }
  return readLevels(top, {
    children: (node) => node.record.flow?.children ?? [],
    read: (links) => readNodes(kv, root, links),
    status: (node) => node.status,
  });
}
