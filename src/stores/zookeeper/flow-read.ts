/**
 * Reading flows on ZooKeeper: a message's children (job.children()) and the whole tree of its flow (getFlow), from
 * the (queue, id) links each task's state keeps. The tree is read a level at a time, each level in shared requests.
 */
import { childrenOf, treeOf, type FlowLevels } from '../contract/flow-levels.js';
import type { FlowNode } from '../../model/flow.js';
import { decodeState, taskNodes, type TaskState } from './layout.js';
import { statusOf } from './inspect.js';
import type { StoreContext } from './context.js';
import type { MessageStatus } from '../../model/types.js';

type Link = readonly [string, string];

interface NodeRead {
  readonly link: Link;
  readonly state: TaskState;
  readonly status: MessageStatus;
}

/** The statuses of tasks (queue, id), in order; null for one that is gone. */
async function readNodes(ctx: StoreContext, links: readonly Link[]): Promise<(NodeRead | null)[]> {
  const nodes = links.map(([queue, id]) => taskNodes(ctx.queue(queue).paths.task(id)));
  const reads = await ctx.zk.getMany(nodes.flatMap((n) => [n.state, n.claim]));
  const now = Date.now();
  return links.map((link, k) => {
    const read = reads[2 * k];
    if (read == null) return null;
    const state = decodeState(nodes[k]?.state ?? '', read.data);
    const status = statusOf(ctx.queue(link[0]), link[1], state, reads[2 * k + 1] != null, now);
    return { link, state, status };
  });
}

/** How the flow's tasks are read on ZooKeeper (contract/flow-levels.ts). */
function levels(ctx: StoreContext): FlowLevels<NodeRead, Link> {
  return {
    parent: (node) => node.state.parent,
    children: (node) => node.state.children ?? [],
    read: (links) => readNodes(ctx, links),
    status: (node) => node.status,
  };
}

/** A message's children's statuses, in the order they were written (those gone left out). */
export function flowChildren(ctx: StoreContext, queue: string, id: string): Promise<MessageStatus[]> {
  return childrenOf([queue, id], levels(ctx));
}

/** The tree of the flow the message belongs to, from its root (a message in none: itself alone); null if gone. */
export function flowTree(ctx: StoreContext, queue: string, id: string): Promise<FlowNode | null> {
  return treeOf([queue, id], levels(ctx));
}
