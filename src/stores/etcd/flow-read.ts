/**
 * Reading flows on etcd: a message's children (job.children()) and the whole tree of its flow (getFlow), from the
 * links each record keeps (record.ts FlowFields). The tree is read a level at a time, each level in shared reads.
 */
import { childrenOf, treeOf, type FlowLevels } from '../contract/flow-levels.js';
import type { FlowNode } from '../../model/flow.js';
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

/** How the flow's messages are read on etcd (contract/flow-levels.ts). */
function levels(kv: Kv, root: string): FlowLevels<NodeRead, FlowLink> {
  return {
    parent: (node) => node.record.flow?.parent,
    children: (node) => node.record.flow?.children ?? [],
    read: (links) => readNodes(kv, root, links),
    status: (node) => node.status,
  };
}

/** A message's children's statuses, in the order they were written (those gone left out). */
export function flowChildren(kv: Kv, root: string, queue: string, id: string): Promise<MessageStatus[]> {
  return childrenOf([queue, id], levels(kv, root));
}

/** The tree of the flow the message belongs to, from its root (a message in none: itself alone); null if gone. */
export function flowTree(kv: Kv, root: string, queue: string, id: string): Promise<FlowNode | null> {
  return treeOf([queue, id], levels(kv, root));
}
