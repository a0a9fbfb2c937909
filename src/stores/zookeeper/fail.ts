/**
 * A message that ends in failure: its `state` set to the failed phase, its
 * queue entry removed and a failed entry created (`/failed/<bucket>/<failedAt>-<task>-<seq>`,
 * which GC walks after `failedLifetimeMs` and listings read), all in the
 * caller's multi; or, with a dead-letter queue configured, moved there in that multi.
 */
import { indexRemovals } from './debounce-index.js';
import { parseFilterClass } from '../../model/filters.js';
import { encodeState, entryPrefix, makeState, priorityOf, taskNodes, type TaskState } from './layout.js';
import { ZkCode, type ZkOp } from './client.js';
import type { StoreContext } from './context.js';
import type { EventRecord } from './events.js';
import type { QueueContext } from './queue.js';
import type { AttemptRecord } from '../../model/types.js';

/** The `history` field of a state: absent when there is none (most messages). */
export function withHistory(history: readonly AttemptRecord[] | undefined): { history?: readonly AttemptRecord[] } {
  return history === undefined || history.length === 0 ? { history: undefined } : { history };
}

/** The failed state of `s`, before its failed entry is known. */
export function failedState(
  s: TaskState,
  now: number,
  error: string | null,
  history: readonly AttemptRecord[] | undefined,
): TaskState {
  return makeState(
    {
      ...s,
      phase: 'failed',
      lockUntil: 0,
      consumer: null,
      backoffUntil: 0,
      requeue: false,
      outcome: 'error',
      lastError: error,
      updatedAt: now,
      entry: null,
      done: null,
      // A final failure pays a flow child's count (flow-ends.ts), in the multi that writes this state.
      owes: undefined,
      childrenLeft: undefined,
      ...withHistory(history),
    },
    now,
  );
}

/**
 * Writes `failed` (from failedState) with a version check, removes the queue
 * entry (when there is one) and creates the failed entry.
 */
export async function failOps(
  q: QueueContext,
  id: string,
  failed: TaskState,
  stateVersion: number,
  entryPath: string | null,
): Promise<ZkOp[]> {
  const prefix = `${await q.failed.tailBucket()}/${entryPrefix(failed.updatedAt, id)}`;
  const ops: ZkOp[] = [
    {
      op: 'set',
      path: q.paths.task(id) + '/state',
      data: encodeState({ ...failed, done: prefix }),
      version: stateVersion,
    },
  ];
  if (entryPath !== null) ops.push({ op: 'remove', path: entryPath, version: -1 });
  ops.push({ op: 'create', path: prefix, kind: 'sequential' });
  return ops;
}

/**
 * The ops that end a task in failure: moved to the queue's dead-letter queue
 * when one is configured (and `deadLetter` allows it), else failed in place.
 * `dlq` names the dead-letter queue the ops write to, for wake-ups.
 */
export async function endInFailure(
  ctx: StoreContext,
  q: QueueContext,
  id: string,
  failed: TaskState,
  stateVersion: number,
  entryPath: string | null,
  deadLetter: boolean,
): Promise<{ ops: ZkOp[]; dlq: string | null; event: EventRecord }> {
  const config = await q.confView().then((c) => c.config);
  // Recorded in this queue whether the message fails here or moves on (the dead-letter queue records nothing);
  // the caller writes it with the other events of its multi.
  const event: EventRecord = {
    type: 'failed',
    id,
    attempt: failed.attempt,
    at: failed.updatedAt,
    error: failed.lastError,
  };
  const target = deadLetter ? config.deadLetterQueue : null;
  const moved =
    target === null ? null : await deadLetterOps(ctx, q, ctx.queue(target), id, failed, stateVersion, entryPath);
  if (moved !== null) return { ops: moved, dlq: target, event };
  return { ops: await failOps(q, id, failed, stateVersion, entryPath), dlq: null, event };
}

/**
 * Moves a failing task to the dead-letter queue `dlq` in one multi: its
 * whole tree created there, queued now at attempt 0 with its content,
 * filters, policy, outcome and history, and removed here (the `state`
 * removal checks the version read). The multi fails on the create of the task
 * in `dlq` when that id exists there: see isDeadLetterClash. Null when the task is gone.
 */
async function deadLetterOps(
  ctx: StoreContext,
  q: QueueContext,
  dlq: QueueContext,
  id: string,
  failed: TaskState,
  stateVersion: number,
  entryPath: string | null,
): Promise<ZkOp[] | null> {
  const source = taskNodes(q.paths.task(id));
  const [data, metadata, report] = await ctx.zk.getMany([source.data, source.metadata, source.report]);
  if (data == null || metadata == null) return null;
  await dlq.ensure();
  const bucket = dlq.paths.taskBucket(id);
  if (!dlq.knowsTaskBucket(bucket)) await dlq.makeTaskBucket(bucket);
  const sub = dlq.sub(failed.filterClass, priorityOf(failed));
  const tail = await sub.tailBucket();
  if (sub.tailCreate(tail) !== null) await sub.makeTail();
  const now = failed.updatedAt;
  const prefix = `${tail}/${entryPrefix(now, id)}`;
  const queued = makeState(
    { ...failed, phase: 'pending', readyAt: now, attempt: 0, losses: undefined, entry: prefix, done: null },
    now,
  );
  const target = taskNodes(dlq.paths.task(id));
  const filters = Object.entries(parseFilterClass(failed.filterClass));
  return [
    { op: 'create', path: dlq.paths.task(id) },
    { op: 'create', path: target.filters },
    ...filters.map(([name, value]): ZkOp => ({
      op: 'create',
      path: `${target.filters}/${name}`,
      data: Buffer.from(value),
    })),
    { op: 'create', path: target.state, data: encodeState(queued) },
    { op: 'create', path: target.metadata, data: metadata.data },
    { op: 'create', path: target.data, data: data.data },
    // Its handlers' reports move with it.
    ...(report == null ? [] : [{ op: 'create', path: target.report, data: report.data } as const]),
    { op: 'create', path: prefix, kind: 'sequential' },
    // Touching the sub-queue wakes the dead-letter queue's idle workers.
    { op: 'set', path: dlq.paths.classDir(failed.filterClass, priorityOf(failed)), data: Buffer.alloc(0), version: -1 },
    ...filters.map(([name]): ZkOp => ({ op: 'remove', path: `${source.filters}/${name}`, version: -1 })),
    { op: 'remove', path: source.filters, version: -1 },
    { op: 'remove', path: source.state, version: stateVersion },
    { op: 'remove', path: source.metadata, version: -1 },
    { op: 'remove', path: source.data, version: -1 },
    ...(failed.nextEncoding === null ? [] : [{ op: 'remove', path: source.next, version: -1 } as const]),
    ...(report == null ? [] : [{ op: 'remove', path: source.report, version: -1 } as const]),
    { op: 'remove', path: q.paths.task(id), version: -1 },
    ...(entryPath === null ? [] : [{ op: 'remove', path: entryPath, version: -1 } as const]),
    ...(await indexRemovals(ctx.zk, q, [{ id, state: failed }])),
  ];
}

/** A multi failed because the id exists in the dead-letter queue: the message then fails in place. */
export function isDeadLetterClash(q: QueueContext, code: number, op: ZkOp | undefined): boolean {
  if (code !== ZkCode.NodeExists || op?.op !== 'create' || op.path.startsWith(`${q.paths.dir}/`)) return false;
  // /<dlq>/tasks/<bucket>/<task>
  return op.path.split('/').length === 5 && op.path.split('/')[2] === 'tasks';
}
