/**
 * Before a queue is cleared, the flow children it holds that still owe their parents a count end for them as
 * removals do: each in a multi that pays the count (flow-ends.ts) and clears its `owes`, checked by the version
 * read, so a clear that stops halfway and runs again never counts a child twice.
 */
import { childrenOf } from './inspect.js';
import { isZkError } from './client.js';
import { decodeState, encodeState, taskNodes, type TaskState } from './layout.js';
import { FlowEnds } from './flow-ends.js';
import type { StoreContext } from './context.js';
import type { QueueContext } from './queue.js';

// A child whose parent or own state keeps changing under the clear is tried this often, then left.
const MAX_TRIES = 5;

export async function endOwingChildren(ctx: StoreContext, q: QueueContext): Promise<void> {
  for (const bucket of await childrenOf(ctx, q.paths.tasks)) {
    const ids = await childrenOf(ctx, `${q.paths.tasks}/${bucket}`);
    const reads = await ctx.zk.getMany(ids.map((id) => taskNodes(q.paths.task(id)).state));
    for (const [i, read] of reads.entries()) {
      const id = ids[i];
      if (id === undefined || read == null) continue;
      if (decodeState(q.paths.task(id), read.data).owes === true) await endOwingChild(ctx, q, id);
    }
  }
}

async function endOwingChild(ctx: StoreContext, q: QueueContext, id: string): Promise<void> {
  const path = taskNodes(q.paths.task(id)).state;
  for (let tries = 0; tries < MAX_TRIES; tries++) {
    const [read] = await ctx.zk.getMany([path]);
    if (read == null) return;
    const state = decodeState(path, read.data);
    if (state.owes !== true) return;
    const paid: TaskState = { ...state, owes: undefined };
    const ops = await new FlowEnds(ctx).childEnded(q, id, state, { error: 'removed' });
    try {
      await ctx.zk.multi([...ops, { op: 'set', path, data: encodeState(paid), version: read.version }]);
      return;
    } catch (error) {
      // A version changed (the parent's, or the child's own): read again.
      if (!isZkError(error)) throw error;
    }
  }
}
