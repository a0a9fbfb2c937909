/**
 * A flow child's final end, counted for its parent in the multi of that end. A child's `state` says whom it owes
 * (`parent`, `owes`); the parent's `state` holds `childrenLeft`, and the end's multi sets it with the version read,
 * so two children ending at once cannot both write the same count: one multi fails and is planned again from a
 * fresh read. The child's own state, written in that multi, drops `owes`, so however it ends (success, final
 * failure, dead-letter move, cancel, expiry, removal) it is counted once. A message that owes nothing (every
 * message outside a flow) costs nothing here: no read, no op.
 *
 * One FlowEnds plans one multi: the states it writes are remembered, so two ends in one multi (a batch finish of
 * two siblings, a cancel of a parent and its children) chain their versions instead of failing each other.
 */
import { endInFailure, failedState, failOps } from './fail.js';
import { removalOps, resolveEntry } from './task-removal.js';
import { decodeState, encodeState, entryPrefix, makeState, priorityOf, taskNodes, type TaskState } from './layout.js';
import type { BucketedList } from './buckets.js';
import type { ZkOp } from './client.js';
import type { StoreContext } from './context.js';
import type { QueueContext } from './queue.js';

/** A task's state and its version, as read or as this multi leaves it. */
export interface FlowNodeRead {
  readonly state: TaskState;
  readonly version: number;
}

/** How a child ended: null for a success, else its failure's error. */
export type ChildEnd = { readonly error: string | null } | null;

export class FlowEnds {
  /** Task states by `state` path as this multi leaves them (null: removed). */
  private readonly planned = new Map<string, FlowNodeRead | null>();
  /** Queues this multi writes ready messages or dead letters into: their idle workers are woken after it. */
  readonly wakes = new Set<string>();
  /** Paths of the `state` nodes of parents this multi writes: a multi failing on one is planned again. */
  readonly parentPaths = new Set<string>();
  /** The `set` op of each state this multi writes with write(), by path: a later write updates its data. */
  private readonly stateSets = new Map<string, { readonly op: 'set'; path: string; data: Buffer; version: number }>();

  constructor(
    private readonly ctx: StoreContext,
    /** A canceled child may move to its dead-letter queue (false once one clashed). */
    private readonly deadLetter = true,
  ) {}

  /** The ops that count child `id` of `q` (its state `s`, as read) ending as `end`; none when it owes nothing. */
  async childEnded(q: QueueContext, id: string, s: TaskState, end: ChildEnd): Promise<ZkOp[]> {
    if (s.owes !== true || s.parent === undefined) return [];
    const [parentQueue, parentId] = s.parent;
    const pq = this.ctx.queue(parentQueue);
    const parent = await this.read(pq, parentId);
    if (parent === null || parent.state.phase !== 'waiting') return [];
    if (end === null || s.onChildFailure === 'ignore') {
      const left = (parent.state.childrenLeft ?? 1) - 1;
      if (left > 0) return this.write(pq, parentId, parent, { ...parent.state, childrenLeft: left });
      return this.release(pq, parentId, parent);
    }
    const error = `child ${q.name}/${id} failed${end.error === null ? '' : `: ${end.error}`}`;
    const removed = s.onChildFailure === 'remove' ? await this.removeWaiting(pq, parent.state, [q.name, id]) : [];
    return [...removed, ...(await this.failParent(pq, parentId, parent, error))];
  }

  /**
   * Cancels the waiting parent `id` (read as `node`): it fails with `error`, and so does each of its children
   * that has not started (a waiting one as this one, a pending one as a cancel fails it).
   */
  async cancelParent(q: QueueContext, id: string, node: FlowNodeRead, error: string): Promise<ZkOp[]> {
    const ops = await this.failParent(q, id, node, error);
    for (const [childQueue, childId] of node.state.children ?? []) {
      const cq = this.ctx.queue(childQueue);
      const child = await this.read(cq, childId);
      if (child?.state.owes !== true) continue;
      if (child.state.phase === 'waiting') ops.push(...(await this.cancelParent(cq, childId, child, error)));
      else if (child.state.phase === 'pending') ops.push(...(await this.cancelPending(cq, childId, child, error)));
    }
    return ops;
  }

  /**
   * A failed child queued again (retry) while its parent still waits owes it a count again: the parent's count
   * goes up in the retry's multi. Null when it owes nothing (no parent, or one that no longer waits).
   */
  async childAgain(s: TaskState): Promise<ZkOp[] | null> {
    if (s.owes === true || s.parent === undefined) return null;
    const [parentQueue, parentId] = s.parent;
    const pq = this.ctx.queue(parentQueue);
    const parent = await this.read(pq, parentId);
    if (parent === null || parent.state.phase !== 'waiting') return null;
    const left = (parent.state.childrenLeft ?? 0) + 1;
    return this.write(pq, parentId, parent, { ...parent.state, childrenLeft: left });
  }

  /** A task's state, as this multi leaves it when it writes it, else read now. */
  private async read(q: QueueContext, id: string): Promise<FlowNodeRead | null> {
    const path = taskNodes(q.paths.task(id)).state;
    const known = this.planned.get(path);
    if (known !== undefined) return known;
    const [read] = await this.ctx.zk.getMany([path]);
    const node = read == null ? null : { state: decodeState(path, read.data), version: read.version };
    this.planned.set(path, node);
    return node;
  }

  /**
   * Sets a task's state with the version read (or left by this multi), and remembers what it leaves. A state
   * this multi sets already is set once, to the newest: a parent's state holds its children's names, and
   * siblings finished in one batch would otherwise write it once each, past the server's packet limit.
   */
  private write(q: QueueContext, id: string, node: FlowNodeRead, next: TaskState): ZkOp[] {
    const path = taskNodes(q.paths.task(id)).state;
    this.parentPaths.add(path);
    const data = encodeState(next);
    const planned = this.stateSets.get(path);
    if (planned !== undefined) {
      planned.data = data;
      this.planned.set(path, { state: next, version: node.version });
      return [];
    }
    const op = { op: 'set' as const, path, data, version: node.version };
    this.stateSets.set(path, op);
    this.planned.set(path, { state: next, version: node.version + 1 });
    return [op];
  }

  /** The parent's last child ended: it is queued (at the ready time it was written with: its runAt, if any). */
  private async release(q: QueueContext, id: string, parent: FlowNodeRead): Promise<ZkOp[]> {
    const now = Date.now();
    const s = parent.state;
    const prefix = `${await madeTail(q.sub(s.filterClass, priorityOf(s)))}/${entryPrefix(s.readyAt, id)}`;
    const next = makeState({ ...s, phase: 'pending', childrenLeft: undefined, entry: prefix, updatedAt: now }, now);
    const waiting = await resolveEntry(this.ctx.zk, s.entry);
    if (s.readyAt > now) await madeTail(q.waiting);
    this.wakes.add(q.name);
    return [
      ...this.write(q, id, parent, next),
      ...(waiting === null ? [] : [{ op: 'remove', path: waiting, version: -1 } as const]),
      { op: 'create', path: prefix, kind: 'sequential' },
      ...(await q.waitingOps(id, s.readyAt, now)),
      // Touching the sub-queue wakes idle workers, as an enqueue does.
      { op: 'set', path: q.paths.classDir(s.filterClass, priorityOf(s)), data: Buffer.alloc(0), version: -1 },
    ];
  }

  /** A waiting parent fails in place (it never ran: no dead-letter move), and ends for its own parent in turn. */
  private async failParent(q: QueueContext, id: string, parent: FlowNodeRead, error: string): Promise<ZkOp[]> {
    const now = Date.now();
    const failed = failedState(parent.state, now, error, parent.state.history);
    await madeTail(q.failed);
    const ops = await failOps(q, id, failed, parent.version, await resolveEntry(this.ctx.zk, parent.state.entry));
    // Set by failOps' own op from here: a later write makes an op of its own.
    this.stateSets.delete(taskNodes(q.paths.task(id)).state);
    this.planned.set(taskNodes(q.paths.task(id)).state, { state: failed, version: parent.version + 1 });
    this.parentPaths.add(taskNodes(q.paths.task(id)).state);
    const event = { type: 'failed', id, attempt: parent.state.attempt, at: now, error } as const;
    ops.push(...q.events.ops(await q.eventsConfig(), [event]));
    ops.push(...(await this.childEnded(q, id, parent.state, { error })));
    return ops;
  }

  /** A pending child of a canceled parent fails as a cancel fails it (or moves to its dead-letter queue). */
  private async cancelPending(q: QueueContext, id: string, child: FlowNodeRead, error: string): Promise<ZkOp[]> {
    const failed = failedState(child.state, Date.now(), error, child.state.history);
    await madeTail(q.failed);
    const entry = await resolveEntry(this.ctx.zk, child.state.entry);
    const ended = await endInFailure(this.ctx, q, id, failed, child.version, entry, this.deadLetter);
    if (ended.dlq !== null) this.wakes.add(ended.dlq);
    this.planned.set(taskNodes(q.paths.task(id)).state, { state: failed, version: child.version + 1 });
    return [...ended.ops, ...q.events.ops(await q.eventsConfig(), [ended.event])];
  }

  /** Removes a parent's children that have not started (but `except`, the one that failed), and theirs. */
  private async removeWaiting(q: QueueContext, parent: TaskState, except: readonly [string, string]): Promise<ZkOp[]> {
    const ops: ZkOp[] = [];
    for (const [childQueue, childId] of parent.children ?? []) {
      if (childQueue === except[0] && childId === except[1]) continue;
      const cq = this.ctx.queue(childQueue);
      const child = await this.read(cq, childId);
      if (child?.state.owes !== true) continue;
      const waits = child.state.phase === 'waiting';
      if (!waits && child.state.phase !== 'pending') continue;
      if (waits) ops.push(...(await this.removeWaiting(cq, child.state, except)));
      // A pending task has no claim node: a finish removes it with the lock.
      ops.push(...(await removalOps(this.ctx, cq, childId, { ...child, claim: null })));
      this.planned.set(taskNodes(cq.paths.task(childId)).state, null);
    }
    return ops;
  }
}

/** The list's tail bucket, made first when new (a multi writing into another queue's lists cannot make it). */
async function madeTail(list: BucketedList): Promise<string> {
  const tail = await list.tailBucket();
  if (list.tailCreate(tail) !== null) await list.makeTail();
  return tail;
}
