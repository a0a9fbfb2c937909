/**
 * Enqueue: each new message is its whole task tree plus its queue entry,
 * created in one multi, so nothing half-written is ever visible; a batch goes
 * in as few multis as the packet limit allows. An id that exists is refused
 * with its state, or revived / requeued (see existing()), each in one multi
 * with a version check on the task's state.
 */
import { sleep } from '../../model/time.js';
import { PayloadTooLargeError, StoreUnavailableError } from '../../model/errors.js';
import { parseFilterClass } from '../../model/filters.js';
import { DEFAULT_PRIORITY } from '../../model/scheduling.js';
import { isZkError, ZkCode, type ZkOp } from './client.js';
import {
  deriveState,
  encodeState,
  entryPrefix,
  lifoEntryAt,
  makeState,
  taskNodes,
  decodeState,
  type StateFields,
  type TaskState,
  parseSubNode,
  priorityOf,
} from './layout.js';
import { withHistory } from './fail.js';
import { resolveEntry } from './actions.js';
import { readDebounce, replaceOps } from './debounce.js';
import type { StoreContext } from './context.js';
import type { QueueContext } from './queue.js';
import type { NewMessage } from '../contract/contract.js';
import type { EnqueueResult } from '../../model/types.js';

/** Request bytes per multi, below jute.maxbuffer (1 MiB) with room for framing. */
export const MULTI_BYTES = 1_000_000;
const OPS_PER_MULTI = 2000;
/** How long an enqueue waits for a staged flow holding its id to be made live or removed, per try. */
const STAGED_PAUSE_MS = 100;
// Per-op framing and a state node, roughly.
const OP_OVERHEAD = 64;
const STATE_BYTES = 600;
const MAX_TRIES = 20;

/**
 * Ops that must commit with the first multi this enqueue writes, or nothing is written (fireSchedule's
 * compare-and-set). `committed` is set once they have.
 */
export interface Guard {
  readonly ops: readonly ZkOp[];
  committed: boolean;
}

export function enqueueMessages(
  ctx: StoreContext,
  q: QueueContext,
  messages: readonly NewMessage[],
): Promise<EnqueueResult[]> {
  return enqueueGuarded(ctx, q, messages, null) as Promise<EnqueueResult[]>;
}

/**
 * Enqueues as enqueueMessages does; with a guard, the guard's ops go into the first multi that commits, and
 * when that multi fails on one of them nothing was written and the result is null.
 */
export async function enqueueGuarded(
  ctx: StoreContext,
  q: QueueContext,
  messages: readonly NewMessage[],
  guard: Guard | null,
): Promise<EnqueueResult[] | null> {
  for (const m of messages) {
    if (messageBytes(q, m) > MULTI_BYTES) {
      throw new PayloadTooLargeError(messageBytes(q, m), MULTI_BYTES, { id: m.id });
    }
  }
  await q.ensure();
  const results = new Array<EnqueueResult | undefined>(messages.length);
  // The first of each id goes in as new; repeats, and ids that exist, are looked at one by one after.
  const seen = new Set<string>();
  let fresh: number[] = [];
  const later: number[] = [];
  // Messages with a debounce id, one by one in order after the others: each reads its index first.
  const debounced: number[] = [];
  messages.forEach((m, i) => {
    if (seen.has(m.id)) later.push(i);
    else {
      seen.add(m.id);
      (m.debounceId === null ? fresh : debounced).push(i);
    }
  });
  for (let tries = 0; fresh.length > 0; tries++) {
    if (tries > MAX_TRIES) throw new StoreUnavailableError('enqueue: too many conflicting retries');
    const next: number[] = [];
    for (const chunk of chunks(q, messages, fresh)) {
      const outcome = await createChunk(ctx, q, messages, chunk, results, unguarded(guard));
      if (outcome.guardFailed) return null;
      if (outcome.committed && guard !== null) guard.committed = true;
      next.push(...outcome.retry);
      later.push(...outcome.existing);
    }
    fresh = next;
  }
  if (guard !== null && !guard.committed) {
    // Nothing new to add (every id exists, or all debounce): the guard still decides, alone.
    if (!(await commitGuard(ctx, guard.ops))) return null;
    guard.committed = true;
  }
  for (const i of debounced) {
    const m = messages[i];
    if (m === undefined) continue;
    const result = await enqueueDebounced(ctx, q, m);
    if (result === 'exists') later.push(i);
    else results[i] = result;
  }
  later.sort((a, b) => a - b);
  for (const i of later) {
    const m = messages[i];
    if (m !== undefined) results[i] = await existing(ctx, q, m);
  }
  if (results.some((r) => r?.ok === true)) ctx.wakeups.notify(q.name);
  return results.map((r) => {
    if (r === undefined) throw new Error('enqueue left a message without a result');
    return r;
  });
}

function messageBytes(q: QueueContext, m: NewMessage): number {
  const metadata = JSON.stringify(m.metadata).length;
  // Its share of the multi's event node, when events are on: its id and about 48 bytes.
  const event = m.id.length + 48;
  return m.payload.byteLength + metadata + STATE_BYTES + event + 10 * (q.paths.task(m.id).length + OP_OVERHEAD);
}

/** Splits message indexes into runs that each fit one multi. */
function chunks(q: QueueContext, messages: readonly NewMessage[], indexes: readonly number[]): number[][] {
  const out: number[][] = [];
  let current: number[] = [];
  let bytes = 0;
  let ops = 0;
  for (const i of indexes) {
    const m = messages[i];
    if (m === undefined) continue;
    const size = messageBytes(q, m);
    const count = 8 + Object.keys(m.filters).length;
    if (current.length > 0 && (bytes + size > MULTI_BYTES || ops + count > OPS_PER_MULTI)) {
      out.push(current);
      current = [];
      bytes = 0;
      ops = 0;
    }
    current.push(i);
    bytes += size;
    ops += count;
  }
  if (current.length > 0) out.push(current);
  return out;
}

/** A flow's node (flow-write.ts): what its state adds, and whether it waits for children (in `/parents`). */
export interface FlowFields {
  readonly state: Partial<TaskState>;
  readonly waits: boolean;
}

/** The state of a run about to start: queued (or a waiting flow parent), nothing held, tried or finished yet. */
function runState(
  m: NewMessage,
  phase: 'pending' | 'waiting',
  readyAt: number,
  entry: string,
  now: number,
  extra: Partial<StateFields> | undefined,
): TaskState {
  return makeState(
    {
      phase,
      readyAt,
      lockUntil: 0,
      consumer: null,
      backoffUntil: 0,
      requeue: false,
      nextEncoding: null,
      attempt: 0,
      outcome: null,
      lastError: null,
      enqueuedAt: now,
      updatedAt: now,
      encoding: m.encoding,
      filterClass: m.filterClass,
      entry,
      done: null,
      hasMetadata: hasMetadata(m),
      ...withPolicy(m),
      ...extra,
    },
    now,
  );
}

/** Ops that create one task and its entry (a waiting flow parent's: in `/parents`, not in a sub-queue). */
export async function newTaskOps(q: QueueContext, m: NewMessage, now: number, flow?: FlowFields): Promise<ZkOp[]> {
  const taskPath = q.paths.task(m.id);
  const nodes = taskNodes(taskPath);
  const readyAt = m.lifo ? lifoEntryAt(now) : now + m.initialBackoffMs;
  const waits = flow?.waits === true;
  const list = waits ? q.parents : q.sub(m.filterClass, m.priority, m.lifo);
  const prefix = `${await list.tailBucket()}/${entryPrefix(waits ? now : readyAt, m.id)}`;
  const state = runState(m, waits ? 'waiting' : 'pending', readyAt, prefix, now, flow?.state);
  const ops: ZkOp[] = [
    { op: 'create', path: taskPath },
    { op: 'create', path: nodes.filters },
    ...Object.entries(m.filters).map(([name, value]): ZkOp => ({
      op: 'create',
      path: `${nodes.filters}/${name}`,
      data: Buffer.from(value),
    })),
    { op: 'create', path: nodes.state, data: encodeState(state) },
    { op: 'create', path: nodes.metadata, data: Buffer.from(JSON.stringify(m.metadata)) },
    { op: 'create', path: nodes.data, data: asBuffer(m.payload) },
    { op: 'create', path: prefix, kind: 'sequential' },
    ...(waits ? [] : await q.waitingOps(m.id, readyAt, now)),
    ...(await q.expiryOps(m.id, m.policy)),
  ];
  return ops;
}

interface ChunkOutcome {
  /** Message indexes to try again as new. */
  readonly retry: number[];
  /** Message indexes whose id exists. */
  readonly existing: number[];
  /** The multi committed (with its guard). */
  readonly committed?: boolean;
  /** The multi failed on a guard op: nothing was written. */
  readonly guardFailed?: boolean;
}

/** The guard's ops while they have not committed yet. */
function unguarded(guard: Guard | null): readonly ZkOp[] {
  return guard === null || guard.committed ? [] : guard.ops;
}

/** A guard on its own: true when it committed, false when one of its ops failed (a version or existence check). */
async function commitGuard(ctx: StoreContext, ops: readonly ZkOp[]): Promise<boolean> {
  try {
    await ctx.zk.multi([...ops]);
    return true;
  } catch (error) {
    if (isZkError(error) && error.opIndex >= 0) return false;
    throw error;
  }
}

/**
 * One message with a debounce id: replace the waiting message its index names, or add it and point the index
 * at it; each in one multi checked against the index as read, read again when another enqueue got in first.
 * 'exists' when its own id exists (then it is looked at as enqueue does any existing id).
 */
async function enqueueDebounced(ctx: StoreContext, q: QueueContext, m: NewMessage): Promise<EnqueueResult | 'exists'> {
  for (let tries = 0; tries < MAX_TRIES; tries++) {
    const now = Date.now();
    const found = await readDebounce(ctx.zk, q, m, now);
    const replace = await replaceOps(ctx.zk, q, m, found, now);
    if (replace === null) {
      const results: (EnqueueResult | undefined)[] = [undefined];
      const outcome = await createChunk(ctx, q, [m], [0], results, [found.claimIndex]);
      if (outcome.existing.length > 0) return 'exists';
      const result = results[0];
      if (outcome.committed && result !== undefined) return result;
      continue;
    }
    const ops = [...replace.ops, ...q.events.ops(await q.eventsConfig(), [replace.event])];
    if (await applied(ctx, q, ops)) {
      if (replace.oldEntry !== null) q.listOf(parentOf(replace.oldEntry))?.forgetPath(replace.oldEntry);
      return { ok: true, id: replace.event.id, action: 'debounced' };
    }
    // The index or the message changed (BAD_VERSION), or its entry went: read again.
  }
  throw new StoreUnavailableError(`enqueue of ${m.id}: its debounce id ${m.debounceId ?? ''} kept changing; try again`);
}

async function createChunk(
  ctx: StoreContext,
  q: QueueContext,
  messages: readonly NewMessage[],
  chunk: readonly number[],
  results: (EnqueueResult | undefined)[],
  guard: readonly ZkOp[] = [],
): Promise<ChunkOutcome> {
  // Task buckets are made on first use, in the same multi: /tasks is listed once so we know which are missing.
  await q.listTaskBuckets();
  const buckets = [...new Set(chunk.map((i) => q.paths.taskBucket(messages[i]?.id ?? '')))].filter(
    (b) => !q.knowsTaskBucket(b),
  );
  const now = Date.now();
  const ops: ZkOp[] = [...guard, ...buckets.map((path): ZkOp => ({ op: 'create', path }))];
  const owner: number[] = ops.map(() => -1);
  // The sub-queue nodes to touch, by path.
  const classes = new Set<string>();
  for (const i of chunk) {
    const m = messages[i];
    if (m === undefined) continue;
    const taskOps = await newTaskOps(q, m, now);
    ops.push(...taskOps);
    owner.push(...taskOps.map(() => i));
    classes.add(q.paths.classDir(m.filterClass, m.priority, m.lifo));
  }
  const events = q.events.ops(
    await q.eventsConfig(),
    chunk.map((i) => ({ type: 'enqueued', id: messages[i]?.id ?? '', attempt: 0, at: now })),
  );
  ops.push(...events);
  owner.push(...events.map(() => -1));
  // Touching each sub-queue node is what wakes idle workers' watches.
  for (const path of classes) {
    ops.push({ op: 'set', path, data: Buffer.alloc(0), version: -1 });
    owner.push(-1);
  }
  // A sub-queue's next bucket, when the last one filled up, is made in the same multi.
  const bucketOps = q.bucketCreates(ops);
  ops.unshift(...bucketOps);
  owner.unshift(...bucketOps.map(() => -1));
  const newBuckets = bucketOps.map((op) => op.path);
  try {
    const created = await ctx.zk.multi(ops);
    q.noteBucketsMade(newBuckets);
    for (const i of chunk) {
      const m = messages[i];
      if (m !== undefined) results[i] = { ok: true, id: m.id, action: 'added' };
    }
    created.forEach((r, k) => {
      const op = ops[k];
      if (op?.op === 'create' && op.kind === 'sequential' && r.path !== undefined) {
        const m = messages[owner[k] ?? -1];
        if (m !== undefined) q.sub(m.filterClass, m.priority, m.lifo).noteCreated(r.path);
      }
    });
    for (const bucket of buckets) q.noteTaskBucket(bucket);
    return { retry: [], existing: [], committed: true };
  } catch (error) {
    if (!isZkError(error) || error.opIndex < 0) throw error;
    const failedOp = ops[error.opIndex];
    if (failedOp !== undefined && guard.includes(failedOp)) return { retry: [], existing: [], guardFailed: true };
    const index = owner[error.opIndex] ?? -1;
    const m = messages[index];
    if (failedOp === undefined) throw error;
    if (error.code === ZkCode.NodeExists && newBuckets.includes(failedOp.path)) {
      // Another writer made that bucket first.
      q.noteBucketsMade([failedOp.path]);
      return { retry: [...chunk], existing: [] };
    }
    if (error.code === ZkCode.NodeExists && buckets.includes(failedOp.path)) {
      // Another producer made a task bucket first: list them again, and try again.
      q.forgetTaskBuckets();
      return { retry: [...chunk], existing: [] };
    }
    if (error.code === ZkCode.NodeExists && m !== undefined && failedOp.path === q.paths.task(m.id)) {
      // That id exists; find any others of the chunk that do before trying the rest again.
      const others = chunk.filter((i) => i !== index);
      const exists = await Promise.all(
        others.map((i) => ctx.zk.exists(q.paths.task(messages[i]?.id ?? '')).then((s) => s !== null)),
      );
      return {
        retry: others.filter((_, k) => !exists[k]),
        existing: [index, ...others.filter((_, k) => exists[k])],
      };
    }
    if (error.code === ZkCode.NoNode) {
      await makeParents(q, failedOp.path);
      return { retry: [...chunk], existing: [] };
    }
    throw error;
  }
}

/** A create failed for a missing parent: a task bucket, a sub-queue or its tail bucket. */
async function makeParents(q: QueueContext, path: string): Promise<void> {
  const parent = parentOf(path);
  if (parent.startsWith(`${q.paths.tasks}/`) && parent.split('/').length === q.paths.tasks.split('/').length + 1) {
    await q.makeTaskBucket(parent);
    return;
  }
  if (parent.startsWith(`${q.paths.queue}/`)) {
    const classDir = parent
      .split('/')
      .slice(0, q.paths.queue.split('/').length + 1)
      .join('/');
    await q.ensure();
    const key = parseSubNode(classDir.slice(q.paths.queue.length + 1));
    await q.sub(key.filterClass, key.priority, key.lifo).makeTail();
    return;
  }
  // The queue's skeleton itself is missing (cleared or deleted by hand): make it again.
  await q.ensure();
  await q.makeTaskBucket(parent).catch(() => undefined);
}

function parentOf(path: string): string {
  return path.slice(0, path.lastIndexOf('/'));
}

/**
 * The id exists: refuse with its state, except a `done-awaiting-gc` message
 * is revived, and with allowRequeue a `locked` or `done-with-backoff` one is
 * marked to run again. Retried when the state changes under us.
 */
async function existing(ctx: StoreContext, q: QueueContext, m: NewMessage): Promise<EnqueueResult> {
  const taskPath = q.paths.task(m.id);
  const nodes = taskNodes(taskPath);
  let staged = false;
  for (let tries = 0; tries < MAX_TRIES; tries++) {
    const now = Date.now();
    let state: TaskState;
    let version: number;
    let claimed: boolean;
    try {
      const [read, claim] = await Promise.all([ctx.zk.get(nodes.state), ctx.zk.exists(nodes.claim)]);
      state = decodeState(nodes.state, read.data);
      version = read.stat.version;
      claimed = claim !== null;
    } catch (error) {
      if (!isZkError(error, ZkCode.NoNode)) throw error;
      if ((await ctx.zk.exists(taskPath)) !== null) {
        // A task without a state is a big flow's, staged (flow-staging.ts): it is made live or removed soon.
        staged = true;
        await sleep(STAGED_PAUSE_MS);
        continue;
      }
      // Gone meanwhile (GC, clear): add it as new.
      const added = await addOne(ctx, q, m);
      if (added !== null) return added;
      continue;
    }
    const current = deriveState(state, claimed, now);
    let ops: ZkOp[];
    let action: 'revived' | 'requeued';
    // The attempt the stored message is at afterwards: 0, but for a running one marked to run again.
    let attempt = 0;
    if (current === 'done-awaiting-gc') {
      ops = await reviveOps(q, m, state, version, now);
      // Its done entry goes: the done list counts done messages only.
      const doneEntry = await resolveEntry(ctx.zk, state.done);
      if (doneEntry !== null) ops.push({ op: 'remove', path: doneEntry, version: -1 });
      action = 'revived';
    } else if (m.allowRequeue && current === 'done-with-backoff') {
      // Queued again when its backoff ends, with attempt 0 (and the new payload, if asked).
      const prefix = `${await q.sub(state.filterClass, priorityOf(state)).tailBucket()}/${entryPrefix(state.backoffUntil, m.id)}`;
      const next = makeState(
        {
          ...state,
          phase: 'pending',
          readyAt: state.backoffUntil,
          requeue: true,
          attempt: 0,
          entry: prefix,
          done: null,
          encoding: m.replacePayload ? m.encoding : state.encoding,
          updatedAt: now,
          // The new run starts without the last one's result.
          result: undefined,
          resultEncoding: undefined,
        },
        now,
      );
      ops = [{ op: 'set', path: nodes.state, data: encodeState(next), version }];
      if (m.replacePayload) ops.push({ op: 'set', path: nodes.data, data: asBuffer(m.payload), version: -1 });
      // Its done entry goes: the done list counts done messages only.
      const doneEntry = await resolveEntry(ctx.zk, state.done);
      if (doneEntry !== null) ops.push({ op: 'remove', path: doneEntry, version: -1 });
      // Its /waiting entry, made when its backoff began, ends at the same time: it serves the requeue too.
      ops.push({ op: 'create', path: prefix, kind: 'sequential' });
      ops.push({
        op: 'set',
        path: q.paths.classDir(state.filterClass, priorityOf(state)),
        data: Buffer.alloc(0),
        version: -1,
      });
      action = 'requeued';
    } else if (m.allowRequeue && current === 'locked') {
      const next = makeState(
        { ...state, requeue: true, nextEncoding: m.replacePayload ? m.encoding : state.nextEncoding, updatedAt: now },
        now,
      );
      ops = [{ op: 'set', path: nodes.state, data: encodeState(next), version }];
      attempt = state.attempt;
      if (m.replacePayload) {
        const hasNext = state.nextEncoding !== null;
        ops.push(
          hasNext
            ? { op: 'set', path: nodes.next, data: asBuffer(m.payload), version: -1 }
            : { op: 'create', path: nodes.next, data: asBuffer(m.payload) },
        );
      }
      action = 'requeued';
    } else {
      return { ok: false, id: m.id, state: current };
    }
    ops.push(...q.events.ops(await q.eventsConfig(), [{ type: 'enqueued', id: m.id, attempt, at: now }]));
    if (await applied(ctx, q, ops)) return { ok: true, id: m.id, action };
    // The state changed (BAD_VERSION) or a node came or went: look again.
  }
  if (staged) throw new StoreUnavailableError(`enqueue of ${m.id}: a flow being written holds this id; try again`);
  throw new StoreUnavailableError(`enqueue of ${m.id}: its state kept changing; try again`);
}

async function addOne(ctx: StoreContext, q: QueueContext, m: NewMessage): Promise<EnqueueResult | null> {
  const results: (EnqueueResult | undefined)[] = [undefined];
  const outcome = await createChunk(ctx, q, [m], [0], results);
  if (outcome.existing.length > 0 || outcome.retry.length > 0) return null;
  return results[0] ?? null;
}

async function reviveOps(
  q: QueueContext,
  m: NewMessage,
  old: TaskState,
  version: number,
  now: number,
): Promise<ZkOp[]> {
  const nodes = taskNodes(q.paths.task(m.id));
  const readyAt = m.lifo ? lifoEntryAt(now) : now + m.initialBackoffMs;
  const prefix = `${await q.sub(m.filterClass, m.priority, m.lifo).tailBucket()}/${entryPrefix(readyAt, m.id)}`;
  // The history stays; lost deliveries start again from none.
  const state = runState(m, 'pending', readyAt, prefix, now, withHistory(old.history));
  const ops: ZkOp[] = [
    { op: 'set', path: nodes.state, data: encodeState(state), version },
    { op: 'set', path: nodes.data, data: asBuffer(m.payload), version: -1 },
    { op: 'set', path: nodes.metadata, data: Buffer.from(JSON.stringify(m.metadata)), version: -1 },
  ];
  if (old.nextEncoding !== null) ops.push({ op: 'remove', path: nodes.next, version: -1 });
  if (old.filterClass !== m.filterClass) {
    for (const name of Object.keys(parseFilterClass(old.filterClass))) {
      ops.push({ op: 'remove', path: `${nodes.filters}/${name}`, version: -1 });
    }
    for (const [name, value] of Object.entries(m.filters)) {
      ops.push({ op: 'create', path: `${nodes.filters}/${name}`, data: Buffer.from(value) });
    }
  }
  ops.push({ op: 'create', path: prefix, kind: 'sequential' });
  ops.push(...(await q.waitingOps(m.id, readyAt, now)));
  ops.push(...(await q.expiryOps(m.id, m.policy)));
  ops.push({
    op: 'set',
    path: q.paths.classDir(m.filterClass, m.priority, m.lifo),
    data: Buffer.alloc(0),
    version: -1,
  });
  return ops;
}

/** The policy, priority, group and debounce fields of a new state: each written only when the message has one. */
function withPolicy(m: NewMessage): { policy?: string; priority?: number; group?: string; debounce?: string } {
  return {
    ...(m.policy === null ? {} : { policy: m.policy }),
    ...(m.debounceId === null ? {} : { debounce: m.debounceId }),
    ...(m.priority === DEFAULT_PRIORITY ? {} : { priority: m.priority }),
    ...(m.group === null ? {} : { group: m.group }),
  };
}

function hasMetadata(m: NewMessage): boolean {
  return Object.keys(m.metadata).length > 0;
}

export function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * Runs the multi: false when it failed on something read before it (a version, a node that came or went), to
 * plan again; a parent node it lacked (a new bucket) is made first.
 */
async function applied(ctx: StoreContext, q: QueueContext, ops: readonly ZkOp[]): Promise<boolean> {
  try {
    await ctx.zk.multi(ops);
    return true;
  } catch (error) {
    if (!isZkError(error)) throw error;
    const failed = ops[error.opIndex];
    if (error.code === ZkCode.NoNode && failed?.op === 'create') await makeParents(q, failed.path);
    return false;
  }
}
