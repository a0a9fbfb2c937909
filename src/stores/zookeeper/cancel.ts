/**
 * Cancel: a waiting, delayed or running message fails with the caller's error (its `failed` event, its failed
 * entry), or moves to the dead-letter queue as a final failure does, in one multi guarded by the `state` version
 * read, so it never lands half-way with a finish, a claim or a lock taken over (any of them moves that version,
 * and the cancel reads again). A held message's ephemeral `claim` (and its group's held node) go in the same
 * multi, and a note under its holder's consumer node tells the holder (cancel-watches.ts); its finish, extend
 * and report then find the version moved, and are lost.
 */
import { StoreUnavailableError } from '../../model/errors.js';
import { CANCELABLE_STATES } from '../../model/cancel.js';
import { appendHistory } from '../../model/history.js';
import { commitIndexed, readTask, resolveEntry } from './actions.js';
import { cancelNotePath } from './cancel-notes.js';
import { ZkCode, type ZkOp } from './client.js';
import { endInFailure, failedState, isDeadLetterClash } from './fail.js';
import { releaseOps } from './group-paths.js';
import { FlowEnds } from './flow-ends.js';
import { taskNodes } from './layout.js';
import type { StoreContext } from './context.js';
import type { QueueContext } from './queue.js';
import type { ActionResult } from '../../model/types.js';

const TRIES = 10;

export async function cancelMessage(
  ctx: StoreContext,
  q: QueueContext,
  id: string,
  error: string,
): Promise<ActionResult> {
  if (!(await q.exists())) return { ok: false, id, state: null };
  // The id exists in the dead-letter queue: the message fails here instead, as a final failure does.
  let deadLetter = true;
  // The holder's consumer node is gone (its session ended, GC took it): nobody is left to tell.
  let tell = true;
  for (let tries = 0; tries < TRIES; tries++) {
    const task = await readTask(ctx, q, id);
    if (task === null) return { ok: false, id, state: null };
    if (!CANCELABLE_STATES.has(task.current)) return { ok: false, id, state: task.current };
    const s = task.state;
    if (s.phase === 'waiting') {
      // A flow's waiting parent: it fails, and so do its children that have not started.
      const flow = new FlowEnds(ctx, deadLetter);
      const failure = await commitIndexed(ctx, q, await flow.cancelParent(q, id, task, error));
      if (failure === null) {
        for (const woken of flow.wakes) ctx.wakeups.notify(woken);
        return { ok: true, id, state: 'failed' };
      }
      if (isDeadLetterClash(q, failure.code, failure.op)) deadLetter = false;
      continue;
    }
    const now = Date.now();
    // Held, even with its lock ended (its holder may still finish it): the attempt gets its record.
    const held = s.phase === 'locked';
    const history = held
      ? appendHistory(s.history ?? [], {
          attempt: s.attempt,
          startedAt: null,
          endedAt: now,
          consumer: s.consumer,
          outcome: 'error',
          error,
        })
      : s.history;
    const ops: ZkOp[] = [];
    const holder = held && task.claim !== null && tell ? s.consumer : null;
    const notePath = holder === null ? null : cancelNotePath(q.paths, holder, s.attempt, id);
    if (task.claim !== null) {
      // Before the task's own removal, should it move to the dead-letter queue.
      ops.push({ op: 'remove', path: taskNodes(q.paths.task(id)).claim, version: task.claim }, ...releaseOps(q, id, s));
    }
    if (notePath !== null) ops.push({ op: 'create', path: notePath });
    const entry = await resolveEntry(ctx.zk, s.entry);
    const failed = failedState(s, now, error, history);
    const ended = await endInFailure(ctx, q, id, failed, task.version, entry, deadLetter);
    ops.push(...ended.ops, ...q.events.ops(await q.eventsConfig(), [ended.event]));
    const flow = new FlowEnds(ctx);
    // A flow's child ends for its parent in this multi.
    if (s.owes === true) ops.push(...(await flow.childEnded(q, id, s, { error })));
    const failure = await commitIndexed(ctx, q, ops);
    if (failure === null) {
      if (entry !== null) {
        ctx.claims.forgetEntry(entry);
        q.listOf(entry)?.forgetPath(entry);
      }
      for (const woken of [...flow.wakes, ...(ended.dlq === null ? [] : [ended.dlq])]) ctx.wakeups.notify(woken);
      return { ok: true, id, state: ended.dlq === null ? 'failed' : null };
    }
    if (isDeadLetterClash(q, failure.code, failure.op)) deadLetter = false;
    else if (notePath !== null && failure.op?.path === notePath && failure.code === ZkCode.NoNode) tell = false;
    // Otherwise the message changed meanwhile (a finish, a claim, a renewal): read it again.
  }
  throw new StoreUnavailableError(`${id}: its state kept changing; try again`);
}
