/**
 * Flows on SQLite: a tree of messages written in one transaction, and each child's end counted for its parent in
 * the transaction of that end. A child owes its parent one count while `parent_wait` is 1; the statement that
 * pays it (childEnds) sets it to 0, so however the end comes (finish, failure, dead-letter, cancel, expiry,
 * removal) it is counted once, and a kill between two transactions cannot split it from the child's own write.
 */
import { FlowRefusedError } from '../../model/errors.js';
import { content } from './content.js';
import { Phase } from './schema.js';
import { stateOf, type StateRow } from './state.js';
import { statusOf, type StatusRow } from './inspect.js';
import type { FailingRow, WriteContext } from './write-context.js';
import type { Statements } from './statements.js';
import type { FlowMessage } from '../contract/contract.js';
import type { ChildFailurePolicy, FlowLink, FlowNode } from '../../model/flow.js';
import type { MessageStatus } from '../../model/types.js';

/** child_failure as stored (both SQL stores). */
export const CHILD_FAILURE: Readonly<Record<ChildFailurePolicy, number>> = { fail: 0, ignore: 1, remove: 2 };

/** A parent's row as a child's end reads it. */
interface ParentRow extends FailingRow {
  readonly queue: string;
  readonly phase: number;
  readonly children_left: number;
  readonly ready_at: number;
}

/** A message a flow's node depends on, as found: its row, and whether it still owes the node a count. */
interface Dependency {
  readonly seq: number;
  readonly waits: boolean;
  readonly childFailure: number;
}

/** A dependency's row as a flow reads it, under lock (both SQL stores). */
export type DependencyRow = StateRow & { readonly seq: number; readonly parent_seq: number | null };

/**
 * Whether a dependency (its row, undefined when missing) owes its new parent a count: not when it has ended. One
 * missing, with a parent, or failed under a policy other than `ignore` throws FlowRefusedError (both SQL stores).
 */
export function dependencyWaits(link: FlowLink, row: DependencyRow | undefined, now: number): boolean {
  const { queue, id } = link;
  if (row === undefined) throw new FlowRefusedError(queue, id, 'none', 'missing');
  if (row.parent_seq !== null) throw new FlowRefusedError(queue, id, stateOf(row, now), 'has-parent');
  if (row.phase === Phase.Failed && link.onChildFailure !== 'ignore') {
    throw new FlowRefusedError(queue, id, stateOf(row, now), 'failed');
  }
  return row.phase !== Phase.Done && row.phase !== Phase.Failed;
}

/** The messages a node depends on, read in the flow's transaction (no end can slip between read and link). */
function dependencies(sql: Statements, links: readonly FlowLink[], now: number): Dependency[] {
  return links.map((link) => {
    const row = sql.existing.get(link.queue, link.id) as DependencyRow | undefined;
    const waits = dependencyWaits(link, row, now);
    return { seq: (row as DependencyRow).seq, waits, childFailure: CHILD_FAILURE[link.onChildFailure] };
  });
}

/**
 * Writes a flow's messages, parents first, in the caller's transaction, and links the messages each depends
 * on as its children. An id that exists, or a dependency it cannot take, throws FlowRefusedError, which rolls
 * the whole transaction back. `addClass` records a queue's filter class.
 */
export function writeFlow(
  tx: WriteContext,
  messages: readonly FlowMessage[],
  addClass: (queue: string, filterClass: string) => void,
): void {
  const { sql, now } = tx;
  const seqs: number[] = [];
  const counts = new Map<string, { size: number; waiting: number }>();
  const linked = messages.map((f) => dependencies(sql, f.dependsOn, now));
  for (const [i, { queue, message: m, parent, onChildFailure, children: newChildren }] of messages.entries()) {
    const deps = linked[i] ?? [];
    const children = newChildren + deps.filter((d) => d.waits).length;
    if (!counts.has(queue)) {
      sql.ensureQueue.run(queue);
      counts.set(queue, { size: 0, waiting: 0 });
    }
    addClass(queue, m.filterClass);
    const [payload, encoding, metadata, filters, readyAt] = content(m, now);
    const parentSeq = parent === null ? null : (seqs[parent] ?? null);
    const inserted = sql.flowInsert.get({
      queue,
      id: m.id,
      payload,
      encoding,
      metadata,
      filters,
      phase: children > 0 ? Phase.WaitingChildren : Phase.Pending,
      readyAt,
      now,
      policy: m.policy,
      priority: m.priority,
      group: m.group,
      parentSeq,
      parentWait: parentSeq === null ? 0 : 1,
      childFailure: CHILD_FAILURE[onChildFailure],
      childrenLeft: children,
    }) as { seq: number } | undefined;
    if (inserted === undefined) {
      const existing = sql.existing.get(queue, m.id) as StateRow;
      throw new FlowRefusedError(queue, m.id, stateOf(existing, now));
    }
    seqs.push(inserted.seq);
    for (const d of deps) {
      sql.linkChild.run({
        seq: d.seq,
        parentSeq: inserted.seq,
        parentWait: d.waits ? 1 : 0,
        childFailure: d.childFailure,
      });
    }
    const count = counts.get(queue) as { size: number; waiting: number };
    if (children > 0) count.waiting += 1;
    else count.size += 1;
    tx.event('enqueued', m.id, 0, null, queue);
    if (children === 0 && m.initialBackoffMs === 0) tx.wake(queue);
  }
  for (const [queue, { size, waiting }] of counts) sql.addFlowCounts.run({ queue, size, waiting, failed: 0 });
}

/**
 * A flow's child (by seq) ended, in the transaction of its end, before the row moves or goes: when it still owed
 * its parent a count, the parent counts it, and is queued once none is left; a final failure applies the child's
 * policy (fail the parent, or remove its waiting children and fail it). Nothing when the parent no longer waits.
 */
export function childEnded(tx: WriteContext, seq: number, failed: boolean, error: string | null): void {
  const { sql, now } = tx;
  const link = sql.childEnds.get(seq) as
    { parent_seq: number | null; child_failure: number; queue: string; id: string } | undefined;
  if (link?.parent_seq == null) return;
  const parent = sql.flowParent.get(link.parent_seq) as ParentRow | undefined;
  if (parent?.phase !== Phase.WaitingChildren) return;
  if (!failed || link.child_failure === CHILD_FAILURE.ignore) {
    if (parent.children_left > 1) {
      sql.addChildrenLeft.run({ seq: parent.seq, delta: -1 });
      return;
    }
    sql.releaseParent.run({ seq: parent.seq, now });
    sql.addFlowCounts.run({ queue: parent.queue, size: 1, waiting: -1, failed: 0 });
    if (parent.ready_at <= now) tx.wake(parent.queue);
    return;
  }
  if (link.child_failure === CHILD_FAILURE.remove) removeWaitingChildren(tx, parent.seq);
  failParent(tx, parent, `child ${link.queue}/${link.id} failed${error === null ? '' : `: ${error}`}`);
}

/** A waiting parent fails in place (no dead-letter move: it never ran), and ends for its own parent in turn. */
function failParent(tx: WriteContext, parent: ParentRow, error: string): void {
  const { sql, now } = tx;
  sql.failParent.run({ seq: parent.seq, error, now });
  sql.addFlowCounts.run({ queue: parent.queue, size: 0, waiting: -1, failed: 1 });
  tx.event('failed', parent.id, parent.attempt, error, parent.queue);
  if (parent.parent_wait === 1) childEnded(tx, parent.seq, true, error);
}

/** Removes a parent's children that have not started, and theirs. */
function removeWaitingChildren(tx: WriteContext, parentSeq: number): void {
  const { sql } = tx;
  for (const child of sql.waitingChildren.all(parentSeq) as ParentRow[]) {
    const waits = child.phase === Phase.WaitingChildren;
    if (waits) removeWaitingChildren(tx, child.seq);
    sql.remove.run(child.seq);
    sql.addFlowCounts.run({ queue: child.queue, size: waits ? 0 : -1, waiting: waits ? -1 : 0, failed: 0 });
    tx.event('removed', child.id, child.attempt, null, child.queue);
  }
}

/**
 * Cancels a waiting parent: it fails with `error`, and so does each of its children that has not started (a
 * waiting one as this one, a pending one as a cancel would fail it: `fail` in its queue's context).
 */
export function cancelWaitingParent(
  tx: WriteContext,
  parent: ParentRow,
  error: string,
  fail: (queue: string, row: FailingRow) => void,
): void {
  failParent(tx, parent, error);
  for (const child of tx.sql.waitingChildren.all(parent.seq) as ParentRow[]) {
    if (child.phase === Phase.WaitingChildren) cancelWaitingParent(tx, child, error, fail);
    else fail(child.queue, child);
  }
}

/** The parent row cancelWaitingParent takes, read by seq. */
export function parentRow(sql: Statements, seq: number): ParentRow {
  return sql.flowParent.get(seq) as ParentRow;
}

/** A retried child whose parent still waits counts for it again (it ends anew). */
export function childRetried(
  tx: WriteContext,
  row: { seq: number; parent_seq: number | null; parent_wait: number },
): void {
  if (row.parent_seq === null || row.parent_wait === 1) return;
  const parent = tx.sql.flowParent.get(row.parent_seq) as ParentRow | undefined;
  if (parent?.phase !== Phase.WaitingChildren) return;
  tx.sql.childWaitsAgain.run(row.seq);
  tx.sql.addChildrenLeft.run({ seq: parent.seq, delta: 1 });
}

/**
 * Clear of `queue`: each message there that owes a parent a count ends for it as a removal does (a failure with
 * the error `removed`, under the child's onChildFailure), so a parent in another queue never waits for it forever.
 */
export function clearedChildrenEnd(tx: WriteContext, queue: string): void {
  for (const seq of tx.sql.owingChildren.all(queue) as number[]) childEnded(tx, seq, true, 'removed');
}

type NodeRow = StatusRow & { readonly queue: string };

/** The tree of the flow the message belongs to, from its root (a message in none: itself alone); null if gone. */
export function flowTree(sql: Statements, queue: string, id: string, now: number): FlowNode | null {
  const start = sql.flowNodeOf.get(queue, id) as { seq: number; parent_seq: number | null } | undefined;
  if (start === undefined) return null;
  let seq = start.seq;
  let up = start.parent_seq;
  while (up !== null) {
    const next = sql.flowUp.get(up) as number | null | undefined;
    if (next === undefined) break; // the parent was removed: its children are the tree's top
    seq = up;
    up = next;
  }
  const build = (row: NodeRow): FlowNode => ({
    ...statusOf(row.queue, row, now),
    children: (sql.flowChildren.all(row.seq) as NodeRow[]).map(build),
  });
  return build(sql.flowNode.get(seq) as NodeRow);
}

/** A message's children's statuses, in the order they were written. */
export function flowChildren(sql: Statements, queue: string, id: string, now: number): MessageStatus[] {
  const node = sql.flowNodeOf.get(queue, id) as { seq: number } | undefined;
  if (node === undefined) return [];
  return (sql.flowChildren.all(node.seq) as NodeRow[]).map((row) => statusOf(row.queue, row, now));
}
