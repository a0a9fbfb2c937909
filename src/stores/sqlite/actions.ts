/** retry, remove, promote, cancel and update: each id in the caller's transaction, refused with its state when it does not apply. */
import { Phase } from './schema.js';
import { stateOf, type StateRow } from './state.js';
import { failMessage, type WriteContext } from './failures.js';
import { cancelPlan, type CancelRow } from './cancel-plan.js';
import { updatePlan } from './update-plan.js';
import type { MessageEdit } from '../../model/update.js';
import { cancelWaitingParent, childEnded, childRetried, parentRow } from './flows.js';
import type { CanceledMessage } from '../contract/contract.js';
import type { ActionResult, MessageState } from '../../model/types.js';

type Action = (
  tx: WriteContext,
  row: { seq: number; attempt: number; parent_seq: number | null; parent_wait: number } & StateRow,
  state: MessageState,
  id: string,
) => MessageState | null;

/** Applies `action` to each id that exists; it returns the state after, or undefined to refuse. */
function each(
  tx: WriteContext,
  ids: readonly string[],
  action: (...args: Parameters<Action>) => MessageState | null | undefined,
): ActionResult[] {
  return ids.map((id) => {
    const row = tx.sql.existing.get(tx.queue, id) as Parameters<Action>[1] | undefined;
    if (row === undefined) return { ok: false, id, state: null };
    const state = stateOf(row, tx.now);
    const after = action(tx, row, state, id);
    return after === undefined ? { ok: false, id, state } : { ok: true, id, state: after };
  });
}

/** `failed` → `queued` now, at attempt 0. */
export function retryMessages(tx: WriteContext, ids: readonly string[]): ActionResult[] {
  const results = each(tx, ids, ({ sql, now }, row, state, id) => {
    if (state !== 'failed') return undefined;
    sql.retry.run({ seq: row.seq, now });
    childRetried(tx, row);
    tx.event('enqueued', id, 0);
    return 'queued';
  });
  redriven(tx, changedCount(results));
  return results;
}

/**
 * Up to `max` failed messages, oldest failure first, → `queued`; a flow's child among them owes its parent a count
 * again if the parent still waits, as with retry (flows.ts childRetried).
 */
export function retryFailed(tx: WriteContext, max: number): number {
  const rows = tx.sql.retryFailed.all({ queue: tx.queue, now: tx.now, limit: max }) as ({
    id: string;
  } & Parameters<typeof childRetried>[1])[];
  for (const row of rows) {
    childRetried(tx, row);
    tx.event('enqueued', row.id, 0);
  }
  redriven(tx, rows.length);
  return rows.length;
}

/** How many of an action's results changed their message. Shared with the PostgreSQL store. */
export function changedCount(results: readonly ActionResult[]): number {
  return results.filter((r) => r.ok).length;
}

/** `count` failed messages went back to the queue: the counters move, and the queue's workers wake. */
function redriven(tx: WriteContext, count: number): void {
  if (count === 0) return;
  tx.sql.addCounts.run({ queue: tx.queue, size: count, done: 0, failed: -count });
  tx.wake(tx.queue);
}

/** Deletes messages in any state but a running handler's. */
export function removeMessages(tx: WriteContext, ids: readonly string[]): ActionResult[] {
  return each(tx, ids, ({ sql, queue }, row, state, id) => {
    if (state === 'locked' || state === 'locked-with-requeue') return undefined;
    // A flow's child removed before it ended ends for its parent as a failure would.
    if (row.parent_wait === 1) childEnded(tx, row.seq, true, 'removed');
    sql.remove.run(row.seq);
    tx.event('removed', id, row.attempt);
    if (row.phase === Phase.WaitingChildren) {
      sql.addFlowCounts.run({ queue, size: 0, waiting: -1, failed: 0 });
      return null;
    }
    const done = row.phase === Phase.Done ? 1 : 0;
    const failed = row.phase === Phase.Failed ? 1 : 0;
    sql.addCounts.run({ queue, size: done + failed - 1, done: -done, failed: -failed });
    return null;
  });
}

/** Ends a backoff now: `queued-with-backoff`, or `done-with-requeue` (the requeued run), → `queued`. */
export function promoteMessages(tx: WriteContext, ids: readonly string[]): ActionResult[] {
  const results = each(tx, ids, ({ sql, now }, row, state) => {
    if (state !== 'queued-with-backoff' && state !== 'done-with-requeue') return undefined;
    sql.promote.run({ seq: row.seq, now });
    return 'queued';
  });
  if (results.some((r) => r.ok)) tx.wake(tx.queue);
  return results;
}

/**
 * Cancels a waiting, delayed or running message: it fails with `error` (failMessage: failed here, or moved to the
 * dead-letter queue). A running one is returned, for its holder to be told.
 */
export function cancelMessage(
  tx: WriteContext,
  id: string,
  error: string,
): { result: ActionResult; held: CanceledMessage | null } {
  const { sql, queue, now } = tx;
  const row = sql.cancelRow.get(queue, id) as CancelRow | undefined;
  const plan = cancelPlan(id, row, now, error);
  if (plan.refused !== null || row === undefined)
    return { result: plan.refused ?? { ok: false, id, state: null }, held: null };
  if (row.phase === Phase.WaitingChildren) {
    // Its children that have not started are canceled with it, each failing as a cancel fails it in its queue.
    const inQueue = (q: string): WriteContext => ({ ...tx, queue: q, config: () => tx.configOf(q) });
    cancelWaitingParent(tx, parentRow(sql, row.seq), error, (q, child) => failMessage(inQueue(q), child, error, null));
    return { result: { ok: true, id, state: 'failed' }, held: null };
  }
  failMessage(tx, row, error, plan.history);
  // A held message frees its group's slot.
  if (plan.running) tx.wake(queue);
  const moved = sql.existing.get(queue, id) === undefined;
  return {
    result: { ok: true, id, state: moved ? null : 'failed' },
    held: plan.running ? { id, attempt: row.attempt } : null,
  };
}

/**
 * Changes a waiting message (update-plan.ts), in the caller's transaction: a claim's transaction comes before or
 * after it, never between its read and its write. A new filter class is recorded for claims to read.
 */
export function updateMessage(
  tx: WriteContext,
  id: string,
  edit: MessageEdit,
  knownClasses: Set<string>,
): ActionResult {
  const { sql, queue, now } = tx;
  const row = sql.existing.get(queue, id) as ({ seq: number; attempt: number } & StateRow) | undefined;
  const plan = updatePlan(id, row, now, edit);
  if (plan.refused !== null || row === undefined) return plan.refused ?? { ok: false, id, state: null };
  const filterClass = plan.columns.filters;
  if (filterClass !== null && !knownClasses.has(filterClass)) {
    sql.addClass.run(queue, filterClass);
    knownClasses.add(filterClass);
  }
  sql.update.run(plan.columns);
  tx.event('updated', id, row.attempt);
  // Ready now, or at another time than the one a sleeping worker waits for.
  tx.wake(queue);
  return plan.result;
}
