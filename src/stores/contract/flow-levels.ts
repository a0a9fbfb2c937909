/**
 * A flow read from the links its messages keep, for stores whose records hold their parent and children (etcd,
 * ZooKeeper): a message's children (job.children()), and the whole tree from its root (getFlow), read down a
 * level at a time, each level in one call (the store's shared reads), those gone left out.
 */
import { FLOW_MAX_NODES, type FlowNode } from '../../model/flow.js';
import type { MessageStatus } from '../../model/types.js';

/** How a store reads its nodes: their links, and many nodes at once (null for one gone). */
export interface FlowLevels<N, L> {
  parent(node: N): L | undefined;
  children(node: N): readonly L[];
  read(links: readonly L[]): Promise<(N | null)[]>;
  status(node: N): MessageStatus;
}

/** A tree node while its levels are read. */
interface Building<N> {
  readonly node: N;
  readonly children: Building<N>[];
}

/** The statuses of the message's children, in the order they were written (those gone left out). */
export async function childrenOf<N, L>(link: L, store: FlowLevels<N, L>): Promise<MessageStatus[]> {
  const [node] = await store.read([link]);
  if (node == null) return [];
  const children = await store.read(store.children(node));
  return children.flatMap((child) => (child === null ? [] : [store.status(child)]));
}

/** The tree of the flow the message belongs to, from its root (a message in none: itself alone); null if gone. */
export async function treeOf<N, L>(link: L, store: FlowLevels<N, L>): Promise<FlowNode | null> {
  let [top] = await store.read([link]);
  if (top == null) return null;
  for (let depth = 0; depth < FLOW_MAX_NODES; depth++) {
    const parent = store.parent(top);
    if (parent === undefined) break;
    const [up] = await store.read([parent]);
    // The parent was removed: its children are the tree's top.
    if (up == null) break;
    top = up;
  }
  return readLevels(top, store);
}

/** The tree under `top`, read level by level. */
async function readLevels<N, L>(top: N, store: FlowLevels<N, L>): Promise<FlowNode> {
  const root: Building<N> = { node: top, children: [] };
  let level = [root];
  while (level.length > 0) {
    const reads = await store.read(level.flatMap((b) => store.children(b.node)));
    const next: Building<N>[] = [];
    let k = 0;
    for (const parent of level) {
      for (let n = 0; n < store.children(parent.node).length; n++) {
        const read = reads[k++];
        if (read == null) continue;
        const child: Building<N> = { node: read, children: [] };
        parent.children.push(child);
        next.push(child);
      }
    }
    level = next;
  }
  const flowNode = (b: Building<N>): FlowNode => ({ ...store.status(b.node), children: b.children.map(flowNode) });
  return flowNode(root);
}
