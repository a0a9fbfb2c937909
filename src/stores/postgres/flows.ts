/**
 * Flows on PostgreSQL, as on SQLite (sqlite/flows.ts): a tree written in one statement of one transaction, and
 * each child's end counted for its parent in the transaction of that end. A child owes its parent one count
 * while `parent_wait` is 1; the statement that pays it (flow-sql.ts: childrenSucceededSql, childFailsSql) sets it
 * to 0 and takes the parent's count under the parent's row lock, so however the end comes (finish, failure, dead-letter, cancel,
 * expiry, removal, clear) it is counted once, and never split from the child's own write.
 */
import { FlowRefusedError } from '../../model/errors.js';
import { asBuffer } from '../sqlite/content.js';
import { CHILD_FAILURE, dependencyWaits, type DependencyRow } from '../sqlite/flows.js';
import { statusOf, type StatusRow } from '../sqlite/inspect.js';
import { stateOf, type StateRow } from '../sqlite/state.js';
import {
  childFailsSql,
  childrenNotStartedSql,
  childrenSucceededSql,
  childrenRetriedSql,
  failParentSql,
  flowChildrenSql,
  flowInsertSql,
  flowTreeSql,
  linkDependenciesSql,
  lockDependenciesSql,
  removeChildrenSql,
  waitingParentSql,
} from './flow-sql.js';
import type { Queryable } from './queryable.js';
import type { WriteContext } from './tx.js';
import type { FlowMessage } from '../contract/contract.js';
import type { FlowNode } from '../../model/flow.js';
import type { MessageStatus } from '../../model/types.js';

/** A parent's row, or a child's that has not started, as flows read it. */
export interface FlowRow {
  readonly seq: number;
  readonly queue: string;
  readonly id: string;
  readonly phase: number;
  readonly attempt: number;
  readonly filters: string;
  readonly history: string | null;
  readonly parent_wait: number;
}

/** What childFailsSql answers: the link to the parent, and the parent's phase when it counted the end. */
interface EndRow {
  readonly parent_seq: number | null;
  readonly child_failure: number;
  readonly queue: string;
  readonly id: string;
  readonly parent_phase: number | null;
  readonly parent_queue: string | null;
  readonly parent_ready_at: number | null;
}

/**
 * Writes a flow's messages, parents first, in the caller's transaction: the messages they depend on locked and
 * checked, then one statement for the new ones, then one that links the dependencies. An id that exists, or a
 * dependency the flow cannot take, throws FlowRefusedError, which rolls the whole transaction back.
 */
export async function writeFlow(tx: WriteContext, messages: readonly FlowMessage[]): Promise<void> {
  const { db, s, now } = tx;
  const links = await lockDependencies(tx, messages);
  const waiting = messages.map((f) => f.children + links.filter((l) => l.parent === f && l.waits).length);
  const written = await db.query<{ queue: string; id: string }>(flowInsertSql(s), [
    messages.map((f) => f.queue),
    messages.map((f) => f.message.id),
    messages.map((f) => asBuffer(f.message.payload)),
    messages.map((f) => (f.message.encoding === 'json' ? 0 : 1)),
    messages.map((f) => JSON.stringify(f.message.metadata)),
    messages.map((f) => f.message.filterClass),
    messages.map((f) => f.message.initialBackoffMs),
    messages.map((f) => f.message.policy),
    messages.map((f) => f.message.priority),
    messages.map((f) => f.message.group),
    messages.map((f) => f.parent),
    waiting,
    messages.map((f) => CHILD_FAILURE[f.onChildFailure]),
    now,
  ]);
  if (written.rows.length < messages.length) await refuse(db, s, messages, written.rows, now);
  if (links.length > 0) {
    await db.query(linkDependenciesSql(s), [
      links.map((l) => l.seq),
      links.map((l) => l.parent.queue),
      links.map((l) => l.parent.message.id),
      links.map((l) => (l.waits ? 1 : 0)),
      links.map((l) => l.childFailure),
    ]);
  }
  for (const [i, { queue, message }] of messages.entries()) {
    tx.event('enqueued', message.id, 0, null, queue);
    if ((waiting[i] ?? 0) > 0) continue;
    tx.count(1, 0, 0, queue);
    if (message.initialBackoffMs === 0) tx.wake(queue);
  }
}

/** A dependency as locked: its row's seq, the node it becomes a child of, whether it owes that node a count. */
interface LockedDependency {
  readonly seq: number;
  readonly parent: FlowMessage;
  readonly waits: boolean;
  readonly childFailure: number;
}

/** Locks the messages the flow's nodes depend on, and checks each (dependencyWaits). */
async function lockDependencies(tx: WriteContext, messages: readonly FlowMessage[]): Promise<LockedDependency[]> {
  const named = messages.flatMap((parent) => parent.dependsOn.map((link) => ({ parent, link })));
  if (named.length === 0) return [];
  const { rows } = await tx.db.query<DependencyRow & { queue: string; id: string }>(lockDependenciesSql(tx.s), [
    named.map(({ link }) => link.queue),
    named.map(({ link }) => link.id),
  ]);
  const found = new Map(rows.map((row) => [`${row.queue}\n${row.id}`, row]));
  return named.map(({ parent, link }) => {
    const row = found.get(`${link.queue}\n${link.id}`);
    const waits = dependencyWaits(link, row, tx.now);
    return { seq: (row as DependencyRow).seq, parent, waits, childFailure: CHILD_FAILURE[link.onChildFailure] };
  });
}

/** Throws FlowRefusedError for the first message not written: its id existed. */
async function refuse(
  db: Queryable,
  s: string,
  messages: readonly FlowMessage[],
  written: readonly { queue: string; id: string }[],
  now: number,
): Promise<never> {
  const keys = new Set(written.map((r) => `${r.queue}\n${r.id}`));
  const clash = messages.find((f) => !keys.has(`${f.queue}\n${f.message.id}`)) as FlowMessage;
  const { rows } = await db.query<StateRow>(
    `SELECT phase, ready_at, lock_until, backoff_until, requeue FROM ${s}.messages WHERE queue = $1 AND id = $2`,
    [clash.queue, clash.message.id],
  );
  const [row] = rows;
  throw new FlowRefusedError(clash.queue, clash.message.id, row === undefined ? 'queued' : stateOf(row, now));
}

/**
 * A flow's child (by seq) failed for good, in the transaction of its end, before the row moves or goes: when it
 * still owed its parent a count, its policy applies: ignore (the parent counts it, queued once none is left), fail
 * the parent, or remove the parent's waiting children and fail it. Nothing when the parent no longer waits.
 */
export async function childFailed(tx: WriteContext, seq: number, error: string | null): Promise<void> {
  const { rows } = await tx.db.query<EndRow>(childFailsSql(tx.s), [seq, tx.now]);
  const [link] = rows;
  if (link?.parent_seq == null) return;
  if (link.parent_phase !== null) {
    if (link.parent_phase !== 0 || link.parent_queue === null) return;
    tx.count(1, 0, 0, link.parent_queue);
    if ((link.parent_ready_at ?? 0) <= tx.now) tx.wake(link.parent_queue);
    return;
  }
  if (link.child_failure === CHILD_FAILURE.ignore) return; // the parent no longer waits
  const parent = (await tx.db.query<FlowRow>(waitingParentSql(tx.s), [link.parent_seq])).rows[0];
  if (parent === undefined) return;
  if (link.child_failure === CHILD_FAILURE.remove) await removeWaitingChildren(tx, parent.seq);
  await failParent(tx, parent, `child ${link.queue}/${link.id} failed${error === null ? '' : `: ${error}`}`);
}

/**
 * Flow children (by seq) whose successes this transaction stored in bulk: each counts for its waiting parent
 * once, in one statement for them all; a parent left with none to wait for is pending, and its queue is woken.
 */
export async function childrenSucceeded(tx: WriteContext, seqs: readonly number[]): Promise<void> {
  if (seqs.length === 0) return;
  const { rows } = await tx.db.query<{ phase: number; queue: string; ready_at: number }>(childrenSucceededSql(tx.s), [
    seqs,
    tx.now,
  ]);
  for (const parent of rows) {
    if (parent.phase !== 0) continue;
    tx.count(1, 0, 0, parent.queue);
    if (parent.ready_at <= tx.now) tx.wake(parent.queue);
  }
}

/** A waiting parent fails in place (no dead-letter move: it never ran), and ends for its own parent in turn. */
async function failParent(tx: WriteContext, parent: FlowRow, error: string): Promise<void> {
  await tx.db.query(failParentSql(tx.s), [parent.seq, error, tx.now]);
  // Waiting parents are not in a queue's size (they are counted from their index: inspect.ts).
  tx.count(0, 0, 1, parent.queue);
  tx.event('failed', parent.id, parent.attempt, error, parent.queue);
  if (parent.parent_wait === 1) await childFailed(tx, parent.seq, error);
}

/** Removes a parent's children that have not started, and theirs. */
async function removeWaitingChildren(tx: WriteContext, parentSeq: number): Promise<void> {
  const { rows } = await tx.db.query<FlowRow>(removeChildrenSql(tx.s), [parentSeq]);
  for (const child of rows) {
    const waits = child.phase === 4;
    if (waits) await removeWaitingChildren(tx, child.seq);
    else tx.count(-1, 0, 0, child.queue);
    tx.event('removed', child.id, child.attempt, null, child.queue);
  }
}

/**
 * Cancels a waiting parent (its row read under lock): it fails with `error`, and so does each of its children
 * that has not started, a waiting one as this one, a pending one by `fail` (failures.ts failMessage, as a cancel
 * fails it) in its own queue's context.
 */
export async function cancelWaitingParent(
  tx: WriteContext,
  parent: FlowRow,
  error: string,
  fail: (tx: WriteContext, row: FlowRow) => Promise<void>,
): Promise<void> {
  await failParent(tx, parent, error);
  const { rows } = await tx.db.query<FlowRow>(childrenNotStartedSql(tx.s), [parent.seq]);
  for (const child of rows) {
    if (child.phase === 4) await cancelWaitingParent(tx, child, error, fail);
    else await fail(await inQueue(tx, child.queue), child);
  }
}

/** The write context with `queue` as its own: its configuration, and its counters, events and wake-ups by default. */
export async function inQueue(tx: WriteContext, queue: string): Promise<WriteContext> {
  if (queue === tx.queue) return tx;
  return {
    ...tx,
    queue,
    config: await tx.configOf(queue),
    event: (type, id, attempt, error = null, q = queue) => tx.event(type, id, attempt, error, q),
    count: (size, done, failed, q = queue) => tx.count(size, done, failed, q),
    wake: (q = queue) => tx.wake(q),
  };
}

/**
 * Failed children retried (redriven, one by one or in bulk): each whose parent still waits owes it one count again
 * (it ends anew), and the parent waits for it; one whose parent no longer waits (it failed, or ran) owes nothing.
 * A failed child's debt was paid at its failure (parent_wait 0), so it is never counted twice.
 */
export async function childrenRetried(
  tx: WriteContext,
  rows: readonly { seq: number; parent_seq: number | null; parent_wait: number }[],
): Promise<void> {
  const owing = rows.filter((r) => r.parent_seq !== null && r.parent_wait === 0);
  if (owing.length === 0) return;
  await tx.db.query(childrenRetriedSql(tx.s), [owing.map((r) => r.seq), owing.map((r) => r.parent_seq)]);
}

/**
 * Clear of `queues`: each message there that owes a parent a count ends for it as a removal does (a failure with
 * the error `removed`, under the child's onChildFailure), so a parent in another queue never waits for it forever.
 */
export async function clearedChildrenEnd(tx: WriteContext, queues: readonly string[]): Promise<void> {
  const { rows } = await tx.db.query<{ seq: number }>(
    `SELECT seq FROM ${tx.s}.messages WHERE queue = ANY($1::text[]) AND parent_wait = 1 ORDER BY seq FOR UPDATE`,
    [queues],
  );
  for (const { seq } of rows) await childFailed(tx, seq, 'removed');
}

type NodeRow = StatusRow & { readonly queue: string; readonly parent_seq: number | null; readonly top: boolean };

/** The tree of the flow the message belongs to, from its root (a message in none: itself alone); null if gone. */
export async function flowTree(db: Queryable, s: string, queue: string, id: string): Promise<FlowNode | null> {
  const { rows } = await db.query<NodeRow>(flowTreeSql(s), [queue, id]);
  const now = Date.now();
  const nodes = new Map<number, FlowNode & { children: FlowNode[] }>();
  for (const row of rows) nodes.set(row.seq, { ...statusOf(row.queue, row, now), children: [] as FlowNode[] });
  // Linked after all are made: a dependency (dependsOn) is older than its parent, so it comes first.
  let top: FlowNode | null = null;
  for (const row of rows) {
    const node = nodes.get(row.seq) as FlowNode;
    if (row.top) top = node;
    else if (row.parent_seq !== null) nodes.get(row.parent_seq)?.children.push(node);
  }
  return top;
}

/** A message's children's statuses, in the order they were written. */
export async function flowChildren(db: Queryable, s: string, queue: string, id: string): Promise<MessageStatus[]> {
  const { rows } = await db.query<StatusRow & { queue: string }>(flowChildrenSql(s), [queue, id]);
  const now = Date.now();
  return rows.map((row) => statusOf(row.queue, row, now));
}
