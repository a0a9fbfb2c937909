/**
 * A flow's `dependsOn` on ZooKeeper: the messages its nodes depend on, read for one try of the flow's multi, and
 * the ops that link each as its node's child. Each link sets the message's state with the version read, so an
 * end (or any write) that raced the flow fails the flow's multi, which is planned again from fresh reads; and an
 * end planned from the state before the link fails on its own version check, and is planned again, finding
 * `owes` (flow-ends.ts).
 */
import { FlowRefusedError } from '../../model/errors.js';
import { decodeState, encodeState, taskNodes, type TaskState } from './layout.js';
import type { ZkOp } from './client.js';
import type { StoreContext } from './context.js';
import type { FlowNodeRead } from './flow-ends.js';
import type { FlowLink } from '../../model/flow.js';
import type { FlowMessage } from '../contract/contract.js';

/** A dependency as read: its node's index in the flow, its link, its state node, and whether it owes a count. */
export interface ReadDependency {
  readonly node: number;
  readonly link: FlowLink;
  readonly path: string;
  readonly read: FlowNodeRead;
  readonly waits: boolean;
}

/**
 * Reads every dependency of the flow's nodes. One missing, with a parent, or failed under a policy other than
 * `ignore` throws FlowRefusedError; one that ended otherwise (done, or failed under `ignore`) owes nothing.
 */
export async function readDependencies(ctx: StoreContext, messages: readonly FlowMessage[]): Promise<ReadDependency[]> {
  const named = messages.flatMap((m, node) => m.dependsOn.map((link) => ({ node, link })));
  if (named.length === 0) return [];
  const paths = named.map(({ link }) => taskNodes(ctx.queue(link.queue).paths.task(link.id)).state);
  const reads = await ctx.zk.getMany(paths);
  return named.map(({ node, link }, k) => {
    const read = reads[k];
    const path = paths[k] as string;
    if (read == null) throw new FlowRefusedError(link.queue, link.id, 'none', 'missing');
    const state = decodeState(path, read.data);
    if (state.parent !== undefined) throw new FlowRefusedError(link.queue, link.id, state.state, 'has-parent');
    if (state.phase === 'failed' && link.onChildFailure !== 'ignore') {
      throw new FlowRefusedError(link.queue, link.id, state.state, 'failed');
    }
    const waits = state.phase !== 'done' && state.phase !== 'failed';
    return { node, link, path, read: { state, version: read.version }, waits };
  });
}

/** The ops that link each dependency to its node: its state, with the parent (and `owes`), at the version read. */
export function linkOps(messages: readonly FlowMessage[], deps: readonly ReadDependency[]): ZkOp[] {
  return deps.map(({ node, link, path, read, waits }): ZkOp => {
    const parent = messages[node] as FlowMessage;
    const next: TaskState = {
      ...read.state,
      parent: [parent.queue, parent.message.id],
      ...(waits ? { owes: true as const } : {}),
      ...(link.onChildFailure === 'fail' ? {} : { onChildFailure: link.onChildFailure }),
    };
    return { op: 'set', path, data: encodeState(next), version: read.version };
  });
}
