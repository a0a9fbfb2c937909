/**
 * A message that ends in failure: its `state` set to the failed phase, its
 * queue entry removed and a failed entry created (`/failed/<bucket>/<failedAt>-<task>-<seq>`,
 * which GC walks after `failedLifetimeMs` and listings read), all in the
 * caller's multi.
 */
import { encodeState, entryPrefix, makeState, type TaskState } from './layout.js';
import type { ZkOp } from './client.js';
import type { QueueContext } from './queue.js';
import type { AttemptRecord } from '../model/types.js';

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
