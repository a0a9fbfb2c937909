/**
 * Actions on single messages (retry, remove, promote, update) and the redrive of
 * failed ones: each id one multi, checked against the `state` version read,
 * retried when the message changed in between. Index entries are sequential
 * nodes whose state keeps only their prefix: an action finds the entry's full
 * name in its bucket (one listing of at most 2,000 names).
 */
import { StoreUnavailableError } from '../../model/errors.js';
import { parseFilterClass } from '../../model/filters.js';
import { isZkError, ZkCode, type ZkOp } from './client.js';
import {
  decodeState,
  deriveState,
  encodeState,
  entryPrefix,
  makeState,
  namesEntry,
  taskNodes,
  type Entry,
  type TaskState,
  priorityOf,
} from './layout.js';
import { notePath } from './finish.js';
import { FlowEnds } from './flow-ends.js';
import { removalOps, resolveEntry } from './task-removal.js';
import type { EventRecord } from './events.js';
import type { StoreContext } from './context.js';
import type { QueueContext } from './queue.js';
import type { ActionResult, MessageState } from '../../model/types.js';
import { UPDATABLE_STATES, type MessageEdit } from '../../model/update.js';

export { resolveEntry };

const TRIES = 10;
/** A redrive's multi stays below the packet limit (1 MiB) and ZooKeeper's taste for huge multis. */
const REDRIVE_BYTES = 800_000;
const REDRIVE_OPS = 1500;

export interface TaskRead {
  readonly state: TaskState;
  readonly version: number;
  /** The claim's version, when a claim node exists (a stale one, unless the message is locked). */
  readonly claim: number | null;
  readonly current: MessageState;
}

/** A task's `state` (with its version) and whether its claim exists; null when there is no such task. */
export async function readTask(ctx: StoreContext, q: QueueContext, id: string): Promise<TaskRead | null> {
  const nodes = taskNodes(q.paths.task(id));
  try {
    const [read, claim] = await Promise.all([ctx.zk.get(nodes.state), ctx.zk.exists(nodes.claim)]);
    const state = decodeState(nodes.state, read.data);
    return {
      state,
      version: read.stat.version,
      claim: claim?.version ?? null,
      current: deriveState(state, claim !== null, Date.now()),
    };
  } catch (error) {
    if (isZkError(error, ZkCode.NoNode)) return null;
    throw error;
  }
}

/**
 * Runs one action per id: `plan` returns the multi for the task as read (or
 * a refusal); a multi that fails on a changed task is planned again.
 */
async function each(
  ctx: StoreContext,
  q: QueueContext,
  ids: readonly string[],
  plan: (
    id: string,
    task: TaskRead,
    now: number,
  ) => Promise<{ ops: ZkOp[]; state: MessageState | null } | { refused: MessageState } | null>,
): Promise<ActionResult[]> {
  if (!(await q.exists())) return ids.map((id) => ({ ok: false, id, state: null }));
  const results: ActionResult[] = [];
  let wake = false;
  for (const id of ids) {
    let result: ActionResult | null = null;
    for (let tries = 0; result === null && tries < TRIES; tries++) {
      const task = await readTask(ctx, q, id);
      if (task === null) {
        result = { ok: false, id, state: null };
        break;
      }
      const planned = await plan(id, task, Date.now());
      if (planned === null || 'refused' in planned) {
        result = { ok: false, id, state: planned?.refused ?? task.current };
        break;
      }
      if ((await commitIndexed(ctx, q, planned.ops)) === null) {
        result = { ok: true, id, state: planned.state };
        wake ||= planned.state === 'queued' || planned.state === 'queued-with-backoff';
      }
    }
    if (result === null) throw new StoreUnavailableError(`${id}: its state kept changing; try again`);
    results.push(result);
  }
  if (wake) ctx.wakeups.notify(q.name);
  return results;
}

/**
 * Commits a multi that may write into index buckets: their tail buckets are
 * made in it when new, or first when found missing. Null once committed; else
 * the failing operation (the task changed meanwhile: the caller reads it again).
 */
export async function commitIndexed(
  ctx: StoreContext,
  q: QueueContext,
  body: readonly ZkOp[],
): Promise<{ code: number; op: ZkOp | undefined } | null> {
  for (let tries = 0; ; tries++) {
    const bucketOps = q.bucketCreates(body);
    const ops = [...bucketOps, ...body];
    try {
      const results = await ctx.zk.multi(ops);
      q.noteBucketsMade(bucketOps.map((op) => op.path));
      results.forEach((r, k) => notePath(ctx, ops[k], r.path));
      return null;
    } catch (error) {
      if (!isZkError(error) || error.opIndex < 0) throw error;
      const failed = ops[error.opIndex];
      if (
        tries < TRIES &&
        failed?.op === 'create' &&
        error.code === ZkCode.NodeExists &&
        error.opIndex < bucketOps.length
      ) {
        q.noteBucketsMade([failed.path]);
        continue;
      }
      if (tries < TRIES && failed?.op === 'create' && failed.kind === 'sequential' && error.code === ZkCode.NoNode) {
        await q.ensure();
        await q.listOf(failed.path.slice(0, failed.path.lastIndexOf('/')))?.makeTail();
        continue;
      }
      return { code: error.code, op: failed };
    }
  }
}

/** The ops that put a task back in its sub-queue, ready now, from the state `next` (its entry set here). */
async function requeueOps(
  q: QueueContext,
  id: string,
  next: Omit<TaskState, 'entry' | 'state'>,
  version: number,
  oldEntry: string | null,
  now: number,
): Promise<ZkOp[]> {
  const prefix = `${await q.sub(next.filterClass, priorityOf(next)).tailBucket()}/${entryPrefix(now, id)}`;
  const state = makeState({ ...next, entry: prefix }, now);
  const ops: ZkOp[] = [{ op: 'set', path: taskNodes(q.paths.task(id)).state, data: encodeState(state), version }];
  if (oldEntry !== null) ops.push({ op: 'remove', path: oldEntry, version: -1 });
  ops.push({ op: 'create', path: prefix, kind: 'sequential' });
  // Touching the sub-queue wakes idle workers, as an enqueue does.
  ops.push({
    op: 'set',
    path: q.paths.classDir(next.filterClass, priorityOf(next)),
    data: Buffer.alloc(0),
    version: -1,
  });
  return ops;
}

/**
 * A failed task as it is queued again: attempt 0, no lost deliveries, history and last outcome kept; `owes`: a
 * flow's child whose parent still waits, which counts it again (FlowEnds.childAgain).
 */
function retried(s: TaskState, now: number, owes = false): Omit<TaskState, 'entry' | 'state'> {
  return {
    ...s,
    phase: 'pending',
    readyAt: now,
    lockUntil: 0,
    consumer: null,
    backoffUntil: 0,
    requeue: false,
    attempt: 0,
    losses: undefined,
    updatedAt: now,
    done: null,
    ...(owes ? { owes } : {}),
  };
}

/** The event of a failed message queued again: attempt 0, the next delivery is attempt 1. */
function requeued(id: string, now: number): EventRecord {
  return { type: 'enqueued', id, attempt: 0, at: now };
}

export function retryMessages(ctx: StoreContext, q: QueueContext, ids: readonly string[]): Promise<ActionResult[]> {
  return each(ctx, q, ids, async (id, task, now) => {
    if (task.current !== 'failed') return null;
    const entry = await resolveEntry(ctx.zk, task.state.done);
    const again = await new FlowEnds(ctx).childAgain(task.state);
    const ops = await requeueOps(q, id, retried(task.state, now, again !== null), task.version, entry, now);
    ops.push(...q.events.ops(await q.eventsConfig(), [requeued(id, now)]), ...(again ?? []));
    return { ops, state: 'queued' };
  });
}

export function promoteMessages(ctx: StoreContext, q: QueueContext, ids: readonly string[]): Promise<ActionResult[]> {
  return each(ctx, q, ids, async (id, task, now) => {
    if (task.current !== 'queued-with-backoff' && task.current !== 'done-with-requeue') return null;
    const entry = await resolveEntry(ctx.zk, task.state.entry);
    // A requeue waiting for its backoff runs now, from attempt 0 (set when it was requeued).
    const next = { ...task.state, readyAt: now, requeue: false, updatedAt: now };
    return { ops: await requeueOps(q, id, next, task.version, entry, now), state: 'queued' };
  });
}

export function removeMessages(ctx: StoreContext, q: QueueContext, ids: readonly string[]): Promise<ActionResult[]> {
  return each(ctx, q, ids, async (id, task) => {
    if (task.current === 'locked' || task.current === 'locked-with-requeue') return null;
    const ops = await removalOps(ctx, q, id, task);
    // A flow's child removed before it ended ends for its parent as a failure would.
    if (task.state.owes === true)
      ops.push(...(await new FlowEnds(ctx).childEnded(q, id, task.state, { error: 'removed' })));
    return { ops, state: null };
  });
}

/**
 * Changes a waiting message in one multi that sets its `state` with the version read, as a claim does: of the two,
 * one commits and the other fails (a claim then reads the task again, its data no older than its state). Its entry
 * moves to the sub-queue of its new filter class and priority, named by its ready time (kept unless changed, so it
 * keeps its place by time); a LIFO message's entry stays where it is while only its payload changes.
 */
export function updateMessage(
  ctx: StoreContext,
  q: QueueContext,
  id: string,
  edit: MessageEdit,
): Promise<ActionResult[]> {
  return each(ctx, q, [id], async (_, task, now) => {
    const s = task.state;
    // A holder whose lock ended may still finish its message.
    if (s.phase === 'locked') return { refused: task.current === 'queued' ? 'locked' : task.current };
    if (!UPDATABLE_STATES.has(task.current)) return null;
    const nodes = taskNodes(q.paths.task(id));
    const filterClass = edit.filters?.filterClass ?? s.filterClass;
    const priority = edit.priority ?? priorityOf(s);
    const readyAt = edit.delayMs === null ? s.readyAt : now + edit.delayMs;
    const otherSub = filterClass !== s.filterClass || priority !== priorityOf(s);
    const moves = otherSub || readyAt !== s.readyAt;
    const sub = q.sub(filterClass, priority);
    // A sub-queue no message had yet is made first: a multi's bucket creates need their sub-queue there.
    if (otherSub) await sub.makeTail();
    const prefix = moves ? `${await sub.tailBucket()}/${entryPrefix(readyAt, id)}` : s.entry;
    const next = makeState(
      {
        ...s,
        filterClass,
        priority,
        readyAt,
        requeue: edit.delayMs === null ? s.requeue : false,
        encoding: edit.payload?.encoding ?? s.encoding,
        entry: prefix,
        updatedAt: now,
      },
      now,
    );
    const ops: ZkOp[] = [{ op: 'set', path: nodes.state, data: encodeState(next), version: task.version }];
    if (edit.payload !== null)
      ops.push({ op: 'set', path: nodes.data, data: Buffer.from(edit.payload.bytes), version: -1 });
    if (filterClass !== s.filterClass) {
      for (const name of Object.keys(parseFilterClass(s.filterClass))) {
        ops.push({ op: 'remove', path: `${nodes.filters}/${name}`, version: -1 });
      }
      for (const [name, value] of Object.entries(edit.filters?.values ?? {})) {
        ops.push({ op: 'create', path: `${nodes.filters}/${name}`, data: Buffer.from(value) });
      }
    }
    if (moves && prefix !== null) {
      const oldEntry = await resolveEntry(ctx.zk, s.entry);
      if (oldEntry !== null) ops.push({ op: 'remove', path: oldEntry, version: -1 });
      ops.push({ op: 'create', path: prefix, kind: 'sequential' });
      ops.push(...(await q.waitingOps(id, readyAt, now)));
      // Touching the sub-queue wakes idle workers, as an enqueue does.
      ops.push({ op: 'set', path: q.paths.classDir(filterClass, priority), data: Buffer.alloc(0), version: -1 });
    }
    ops.push(...q.events.ops(await q.eventsConfig(), [{ type: 'updated', id, attempt: s.attempt, at: now }]));
    return { ops, state: next.state };
  });
}

/** Queues again up to `max` failed messages, oldest failure first, in one multi; returns how many. */
export async function retryFailedMessages(ctx: StoreContext, q: QueueContext, max: number): Promise<number> {
  if (max <= 0 || !(await q.exists())) return 0;
  for (let tries = 0; tries < TRIES; tries++) {
    const picked: { entry: Entry; state: TaskState; version: number }[] = [];
    let bytes = 0;
    let count = 0;
    for (const bucket of await q.failed.buckets()) {
      const entries = await q.failed.list(bucket);
      const reads = await ctx.zk.getMany(entries.map((e) => taskNodes(q.paths.task(e.id)).state));
      for (const [k, entry] of entries.entries()) {
        const read = reads[k];
        if (read == null) continue;
        const state = decodeState(entry.path, read.data);
        if (state.phase !== 'failed' || !namesEntry(state.done, entry)) continue;
        bytes += read.data.length + 2 * entry.path.length + 256;
        count += 4;
        if (picked.length > 0 && (bytes > REDRIVE_BYTES || count > REDRIVE_OPS)) break;
        picked.push({ entry, state, version: read.version });
        if (picked.length >= max) break;
      }
      if (picked.length >= max || bytes > REDRIVE_BYTES || count > REDRIVE_OPS) break;
    }
    if (picked.length === 0) return 0;
    const now = Date.now();
    const ops: ZkOp[] = [];
    const flow = new FlowEnds(ctx);
    for (const p of picked) {
      const again = await flow.childAgain(p.state);
      const next = retried(p.state, now, again !== null);
      ops.push(...(await requeueOps(q, p.entry.id, next, p.version, p.entry.path, now)), ...(again ?? []));
    }
    ops.push(
      ...q.events.ops(
        await q.eventsConfig(),
        picked.map((p) => requeued(p.entry.id, now)),
      ),
    );
    if ((await commitIndexed(ctx, q, ops)) === null) {
      ctx.wakeups.notify(q.name);
      return picked.length;
    }
    // One of them changed meanwhile (removed, retried): pick again.
  }
  return 0;
}
