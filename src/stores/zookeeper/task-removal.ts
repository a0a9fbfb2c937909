/**
 * What removes a task: the full name of an index entry from the prefix its state keeps (one listing of its
 * bucket), and the ops that remove the whole task in one multi.
 */
import { reportRemovals } from './reports.js';
import { indexRemovals } from './debounce-index.js';
import { releaseOps } from './group-paths.js';
import { parseFilterClass } from '../../model/filters.js';
import { isZkError, ZkCode, type ZkOp, type ZkSession } from './client.js';
import { namesEntry, taskNodes, type TaskState } from './layout.js';
import type { StoreContext } from './context.js';
import type { QueueContext } from './queue.js';

/** The full path of the entry made from `prefix`, or null when it is gone. */
export async function resolveEntry(zk: ZkSession, prefix: string | null): Promise<string | null> {
  if (prefix === null) return null;
  const bucket = prefix.slice(0, prefix.lastIndexOf('/'));
  try {
    const { children } = await zk.children(bucket);
    const name = children.find((child) => namesEntry(prefix, { path: `${bucket}/${child}` }));
    return name === undefined ? null : `${bucket}/${name}`;
  } catch (error) {
    if (isZkError(error, ZkCode.NoNode)) return null;
    throw error;
  }
}

/** The ops that remove a task (read as `task`), its entry, index nodes and a lingering claim, with its event. */
export async function removalOps(
  ctx: StoreContext,
  q: QueueContext,
  id: string,
  task: { readonly state: TaskState; readonly version: number; readonly claim: number | null },
): Promise<ZkOp[]> {
  const s = task.state;
  const entry = await resolveEntry(ctx.zk, s.phase === 'done' || s.phase === 'failed' ? s.done : s.entry);
  const taskPath = q.paths.task(id);
  const nodes = taskNodes(taskPath);
  const ops: ZkOp[] = [];
  // A lock that ended but whose claim node lingers (a stalled consumer): it goes too.
  if (task.claim !== null) ops.push({ op: 'remove', path: nodes.claim, version: task.claim }, ...releaseOps(q, id, s));
  for (const name of Object.keys(parseFilterClass(s.filterClass))) {
    ops.push({ op: 'remove', path: `${nodes.filters}/${name}`, version: -1 });
  }
  ops.push(
    { op: 'remove', path: nodes.filters, version: -1 },
    { op: 'remove', path: nodes.state, version: task.version },
    { op: 'remove', path: nodes.metadata, version: -1 },
    { op: 'remove', path: nodes.data, version: -1 },
  );
  if (s.nextEncoding !== null) ops.push({ op: 'remove', path: nodes.next, version: -1 });
  ops.push(...(await reportRemovals(ctx.zk, [taskPath])), { op: 'remove', path: taskPath, version: -1 });
  if (entry !== null) ops.push({ op: 'remove', path: entry, version: -1 });
  ops.push(...(await indexRemovals(ctx.zk, q, [{ id, state: s }])));
  ops.push(...q.events.ops(await q.eventsConfig(), [{ type: 'removed', id, attempt: s.attempt, at: Date.now() }]));
  return ops;
}
