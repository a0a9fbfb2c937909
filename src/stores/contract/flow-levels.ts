/**
 * A flow's tree read down from its top a level at a time, for stores whose messages keep their children's links:
 * each level's children are read in one call (the store's shared reads), those gone left out.
 */
import type { FlowNode } from '../../model/flow.js';
import type { MessageStatus } from '../../model/types.js';

/** How a store reads its nodes: their children's links, and many nodes at once (null for one gone). */
export interface FlowLevels<N, L> {
  children(node: N): readonly L[];
  read(links: readonly L[]): Promise<(N | null)[]>;
  status(node: N): MessageStatus;
}

/** A tree node while its levels are read. */
interface Building<N> {
  readonly node: N;
  readonly children: Building<N>[];
}

/** The tree under `top`, read level by level. */
export async function readLevels<N, L>(top: N, store: FlowLevels<N, L>): Promise<FlowNode> {
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
