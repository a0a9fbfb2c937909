/**
 * The debounce index, `/debounce/<debounce id>` (see debounce.ts): its node names, and its removal with the
 * messages it names. A leaf, so removing messages needs nothing of enqueueing.
 */
import type { ZkOp, ZkSession } from './client.js';
import type { TaskState } from './layout.js';
import type { QueueContext } from './queue.js';

/** A debounce id as a node name: '.' and '..' are not allowed in ZooKeeper paths ('%' is never in an id). */
export function debouncePath(q: QueueContext, debounceId: string): string {
  return `${q.paths.debounce}/${debounceId === '.' || debounceId === '..' ? `%${debounceId}` : debounceId}`;
}

/**
 * The removes of the index nodes that still name these tasks (added with a debounce id), to go in the multi
 * that removes the tasks: each with the version read, so an index that moved on to a newer message stays.
 */
export async function indexRemovals(
  zk: ZkSession,
  q: QueueContext,
  tasks: readonly { id: string; state: TaskState }[],
): Promise<ZkOp[]> {
  const debounced = tasks.filter((t) => t.state.debounce !== undefined);
  if (debounced.length === 0) return [];
  const paths = debounced.map((t) => debouncePath(q, t.state.debounce ?? ''));
  const reads = await zk.getMany(paths);
  const ops: ZkOp[] = [];
  debounced.forEach((t, k) => {
    const read = reads[k];
    const path = paths[k];
    if (read != null && path !== undefined && read.data.toString('utf8') === t.id) {
      ops.push({ op: 'remove', path, version: read.version });
    }
  });
  return ops;
}
