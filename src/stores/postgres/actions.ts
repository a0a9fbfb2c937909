/** retry, remove, promote, cancel and update: each id in the caller's transaction, refused with its state when it does not apply. */
// The row layout and its states are SQLite's: one derivation for both.
import { stateOf, type StateRow } from '../sqlite/state.js';
import type { WriteContext } from './tx.js';
import { failMessage } from './failures.js';
import { cancelWaitingParent, childFailed, childrenRetried } from './flows.js';
import { cancelPayload, wakeChannel } from './channel.js';
import { changedCount } from '../sqlite/actions.js';
import { cancelPlan, type CancelRow } from '../sqlite/cancel-plan.js';
import { updatePlan } from '../sqlite/update-plan.js';
import type { MessageEdit } from '../../model/update.js';
import type { ActionResult, MessageState } from '../../model/types.js';

type Row = { seq: number; attempt: number; parent_seq: number | null; parent_wait: number } & {
  -readonly [K in keyof StateRow]: StateRow[K];
};

/** Applies `action` to each id that exists (its row locked); it returns the state after, or undefined to refuse. */
async function each(
  tx: WriteContext,
  ids: readonly string[],
  action: (row: Row, state: MessageState, id: string) => Promise<MessageState | null | undefined>,
): Promise<ActionResult[]> {
  const found = await tx.db.query<Row & { id: string }>(
    `SELECT seq, id, phase, ready_at, lock_until, backoff_until, requeue, attempt, parent_seq, parent_wait
     FROM ${tx.s}.messages WHERE queue = $1 AND id = ANY($2::text[]) ORDER BY seq FOR UPDATE`,
    [tx.queue, [...new Set(ids)]],
  );
  const rows = new Map(found.rows.map((r) => [r.id, r]));
  const results: ActionResult[] = [];
  for (const id of ids) {
    const row = rows.get(id);
    if (row === undefined) {
      results.push({ ok: false, id, state: null });
      continue;
    }
    const state = stateOf(row, tx.now);
    const after = await action(row, state, id);
    if (after === undefined) results.push({ ok: false, id, state });
    else {
      results.push({ ok: true, id, state: after });
      if (after === null) rows.delete(id);
    }
  }
  return results;
}

/** `failed` → `queued` now, at attempt 0. */
export async function retryMessages(tx: WriteContext, ids: readonly string[]): Promise<ActionResult[]> {
  const results = await each(tx, ids, async (row, state, id) => {
    if (state !== 'failed') return undefined;
    await tx.db.query(
      `UPDATE ${tx.s}.messages SET phase = 0, ready_at = $2, attempt = 0, losses = 0, requeue = 0, backoff_until = 0,
         updated_at = $2 WHERE seq = $1`,
      [row.seq, tx.now],
    );
    row.phase = 0;
    row.ready_at = tx.now;
    await childrenRetried(tx, [row]);
    tx.event('enqueued', id, 0);
    return 'queued';
  });
  redriven(tx, changedCount(results));
  return results;
}

/**
 * Up to `max` failed messages, oldest failure first, → `queued`; a flow's child among them owes its parent a count
 * again if the parent still waits, as with retry (flows.ts childrenRetried).
 */
export async function retryFailed(tx: WriteContext, max: number): Promise<number> {
  const { rows } = await tx.db.query<{ id: string; seq: number; parent_seq: number | null; parent_wait: number }>(
    `UPDATE ${tx.s}.messages SET phase = 0, ready_at = $2, attempt = 0, losses = 0, requeue = 0, backoff_until = 0,
       updated_at = $2
     WHERE seq IN (SELECT seq FROM ${tx.s}.messages WHERE queue = $1 AND phase = 3 ORDER BY updated_at, seq LIMIT $3
       FOR UPDATE)
     RETURNING id, seq, parent_seq, parent_wait`,
    [tx.queue, tx.now, max],
  );
  await childrenRetried(tx, rows);
  for (const { id } of rows) tx.event('enqueued', id, 0);
  redriven(tx, rows.length);
  return rows.length;
}

/** `count` failed messages went back to the queue: the counters move, and the queue's workers wake. */
function redriven(tx: WriteContext, count: number): void {
  if (count === 0) return;
  tx.count(count, 0, -count);
  tx.wake();
}

/** Deletes messages in any state but a running handler's. */
export function removeMessages(tx: WriteContext, ids: readonly string[]): Promise<ActionResult[]> {
  return each(tx, ids, async (row, state, id) => {
    if (state === 'locked' || state === 'locked-with-requeue') return undefined;
    // A flow's child removed before it ended ends for its parent as a failure would.
    if (row.parent_wait === 1) await childFailed(tx, row.seq, 'removed');
    // Gone already when a sibling's end removed it (onChildFailure 'remove').
    const deleted = await tx.db.query(`DELETE FROM ${tx.s}.messages WHERE seq = $1`, [row.seq]);
    if (deleted.rowCount === 0) return null;
    tx.event('removed', id, row.attempt);
    // A waiting parent is in no counter (inspect.ts counts them from their index).
    if (row.phase === 4) return null;
    const done = row.phase === 2 ? 1 : 0;
    const failed = row.phase === 3 ? 1 : 0;
    tx.count(done + failed - 1, -done, -failed);
    return null;
  });
}

/** Ends a backoff now: `queued-with-backoff`, or `done-with-requeue` (the requeued run), → `queued`. */
export async function promoteMessages(tx: WriteContext, ids: readonly string[]): Promise<ActionResult[]> {
  const results = await each(tx, ids, async (row, state) => {
    if (state !== 'queued-with-backoff' && state !== 'done-with-requeue') return undefined;
    await tx.db.query(`UPDATE ${tx.s}.messages SET ready_at = $2, requeue = 0, updated_at = $2 WHERE seq = $1`, [
      row.seq,
      tx.now,
    ]);
    row.ready_at = tx.now;
    row.requeue = 0;
    return 'queued';
  });
  if (results.some((r) => r.ok)) tx.wake();
  return results;
}

/**
 * Cancels a waiting, delayed or running message: it fails with `error` (failMessage: failed here, or moved to the
 * dead-letter queue). A running one's holder is told by a NOTIFY that names it, sent at the commit.
 */
export async function cancelMessage(tx: WriteContext, id: string, error: string): Promise<ActionResult> {
  const { rows } = await tx.db.query<CancelRow & { queue: string }>(
    `SELECT seq, queue, id, phase, ready_at, lock_until, backoff_until, requeue, consumer, attempt, filters, history,
       parent_wait
     FROM ${tx.s}.messages WHERE queue = $1 AND id = $2 FOR UPDATE`,
    [tx.queue, id],
  );
  const [row] = rows;
  const plan = cancelPlan(id, row, tx.now, error);
  if (plan.refused !== null || row === undefined) return plan.refused ?? { ok: false, id, state: null };
  if (row.phase === 4) {
    // Its children that have not started are canceled with it, each failing as a cancel fails it in its queue.
    await cancelWaitingParent(tx, row, error, (inQueue, child) => failMessage(inQueue, child, error, null));
    return { ok: true, id, state: 'failed' };
  }
  await failMessage(tx, row, error, plan.history);
  if (plan.running) {
    // A held message frees its group's slot.
    tx.wake();
    await tx.db.query('SELECT pg_notify($1, $2)', [wakeChannel(tx.schema), cancelPayload(tx.queue, row)]);
  }
  const left = await tx.db.query(`SELECT 1 FROM ${tx.s}.messages WHERE queue = $1 AND id = $2`, [tx.queue, id]);
  return { ok: true, id, state: left.rowCount === 0 ? null : 'failed' };
}

/**
 * Changes a waiting message (sqlite/update-plan.ts) under its row lock: a claim that locked it first has it
 * held by now (refused), one that comes after waits for this commit and takes the new content.
 */
export async function updateMessage(tx: WriteContext, id: string, edit: MessageEdit): Promise<ActionResult> {
  const { rows } = await tx.db.query<Row>(
    `SELECT seq, phase, ready_at, lock_until, backoff_until, requeue, attempt FROM ${tx.s}.messages
     WHERE queue = $1 AND id = $2 FOR UPDATE`,
    [tx.queue, id],
  );
  const [row] = rows;
  const plan = updatePlan(id, row, tx.now, edit);
  if (plan.refused !== null || row === undefined) return plan.refused ?? { ok: false, id, state: null };
  const c = plan.columns;
  if (c.filters !== null) {
    await tx.db.query(`INSERT INTO ${tx.s}.classes (queue, filters) VALUES ($1, $2) ON CONFLICT DO NOTHING`, [
      tx.queue,
      c.filters,
    ]);
  }
  await tx.db.query(
    `UPDATE ${tx.s}.messages SET payload = coalesce($2::bytea, payload), encoding = coalesce($3::smallint, encoding),
       priority = coalesce($4::integer, priority), ready_at = coalesce($5::bigint, ready_at),
       requeue = CASE WHEN $5::bigint IS NULL THEN requeue ELSE 0 END, filters = coalesce($6::text, filters)
     WHERE seq = $1`,
    [c.seq, c.payload, c.encoding, c.priority, c.readyAt, c.filters],
  );
  tx.event('updated', id, row.attempt);
  // Ready now, or at another time than the one a sleeping worker waits for.
  tx.wake();
  return plan.result;
}
