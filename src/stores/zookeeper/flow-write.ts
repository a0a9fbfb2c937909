/**
 * Writes a flow on ZooKeeper: every message of the tree, in any queues of the store, so it is all there or none
 * of it. A parent is written `waiting` (its entry in `/parents`, none in a sub-queue, so no claim sees it) with its
 * children's (queue, id) and `childrenLeft`; a child records its parent and that it owes it a count
 * (flow-ends.ts). A flow that fits ZooKeeper's packet limit (jute.maxbuffer) is one multi. A bigger one is staged:
 * its task nodes and payloads go ahead in multis of their own, without their `state` (so no reader sees them,
 * flow-staging.ts), and one last multi writes the states, index entries and links; a flow whose last multi would
 * not fit is refused before anything is written. An id that exists fails its task's create: the flow is refused,
 * and whatever was staged is removed.
 */
import { FlowRefusedError, StoreLimitError, StoreUnavailableError } from '../../model/errors.js';
import { StagedFlow, type StagedLink } from './flow-staging.js';
import { taskNodes } from './layout.js';
import { isZkError, ZkCode, type ZkOp } from './client.js';
import { MULTI_BYTES, newTaskOps, type FlowFields } from './enqueue.js';
import { notePath } from './finish.js';
import { linkOps, readDependencies } from './flow-links.js';
import { messageStatus } from './inspect.js';
import { mapLimit } from './tree.js';
import { sleep } from '../../model/time.js';
import type { EventRecord } from './events.js';
import type { StoreContext } from './context.js';
import type { QueueContext } from './queue.js';
import type { FlowMessage } from '../contract/contract.js';

const TRIES = 10;
/** Tries a flow with dependencies may take when one of them changed under it (its worker is at work on it). */
const LINK_TRIES = 100;
/** An op's owner for a dependency's link: a multi failing there is planned again from fresh reads. */
const LINK = -2;
/**
 * Bytes an operation costs in a multi besides its path and data: framing (13), a create's ACL (31) and flags (4),
 * and the chroot ZooKeeper's paths carry (up to 30 characters).
 */
const OP_BYTES = 80;
/** An op's owner for the staging's end in a staged flow's last multi. */
const STAGING = -3;
/** Room a staged multi keeps for its writer check and record. */
const STAGING_CHUNK_BYTES = 4_000;
/** Stands for the staging's end in a size check made before it is known (a remove per staged multi). */
const STAGING_END: ZkOp[] = Array.from({ length: 8 }, () => ({ op: 'remove', path: '/staging', version: -1 }));

export async function writeFlow(ctx: StoreContext, messages: readonly FlowMessage[]): Promise<void> {
  const queues = new Map<string, QueueContext>();
  for (const { queue } of messages) queues.set(queue, ctx.queue(queue));
  for (const q of queues.values()) {
    await q.ensure();
    await q.listTaskBuckets();
  }
  // Task buckets are made first (a flow's nodes spread over as many as it has nodes): the multi keeps its bytes for
  // the messages.
  const buckets = new Map<string, QueueContext>();
  for (const m of messages) {
    const q = queues.get(m.queue) as QueueContext;
    const bucket = q.paths.taskBucket(m.message.id);
    if (!q.knowsTaskBucket(bucket)) buckets.set(bucket, q);
  }
  await mapLimit([...buckets], 64, ([bucket, q]) => q.makeTaskBucket(bucket));
  const plan = await flowOps(ctx, messages, queues);
  // The fast path: the whole flow in one multi.
  if (multiBytes(plan.ops) <= MULTI_BYTES) return commit(ctx, messages, queues, null, plan);
  const staging = await stageFlow(ctx, messages, queues, plan);
  try {
    await commit(ctx, messages, queues, staging, null);
  } catch (error) {
    await staging.abort().catch(() => undefined);
    throw error;
  }
}

/**
 * Writes the flow's multi (with `staging`: its last multi, the staged nodes left out), planned again from fresh
 * reads while a dependency, a bucket or a list changes under it.
 */
async function commit(
  ctx: StoreContext,
  messages: readonly FlowMessage[],
  queues: ReadonlyMap<string, QueueContext>,
  staging: StagedFlow | null,
  first: FlowPlan | null,
): Promise<void> {
  let planned = first;
  for (let tries = 0, linkTries = 0; tries < TRIES && linkTries < LINK_TRIES; tries++) {
    const full = planned ?? (await flowOps(ctx, messages, queues));
    planned = null;
    const { ops, owner, made, waiting } = staging === null ? full : lastMulti(full, messages, queues, staging);
    checkSize(messages.length, ops, staging !== null);
    try {
      const created = await ctx.zk.multi(ops);
      created.forEach((r, k) => notePath(ctx, ops[k], r.path));
      for (const q of queues.values()) q.noteBucketsMade(made);
      for (const queue of new Set(messages.filter((_, i) => !waiting[i]).map((m) => m.queue))) {
        ctx.wakeups.notify(queue);
      }
      return;
    } catch (error) {
      if (!isZkError(error) || error.opIndex < 0) throw error;
      if (owner[error.opIndex] === STAGING) {
        throw new StoreUnavailableError(
          'flow: its staged messages went (its session ended) before it was made visible; try again',
        );
      }
      if (owner[error.opIndex] === LINK) {
        // A dependency changed (or went) since it was read: read it again, after a pause its writer may finish in.
        tries -= 1;
        linkTries += 1;
        await sleep(Math.random() * 10);
        continue;
      }
      const failed = ops[error.opIndex];
      const m = messages[owner[error.opIndex] ?? -1];
      if (
        error.code === ZkCode.NodeExists &&
        m !== undefined &&
        failed?.path === queues.get(m.queue)?.paths.task(m.message.id)
      ) {
        await refuseTaken(ctx, queues.get(m.queue) as QueueContext, m.message.id);
        continue;
      }
      if (error.code === ZkCode.NodeExists && failed?.op === 'create') {
        // A bucket another writer made first.
        for (const q of queues.values()) q.noteBucketsMade([failed.path]);
        continue;
      }
      if (error.code !== ZkCode.NoNode || failed?.op !== 'create') throw error;
      // A list or sub-queue went (a clear): look again.
      for (const q of queues.values()) q.reset();
      for (const q of queues.values()) await q.ensure();
    }
  }
  throw new StoreUnavailableError('flow: the queues kept changing while it was written; try again');
}

/**
 * The id `id` of `q` exists: the flow is refused with its state (`staged` for a message of another flow being
 * written). Returns when it went since (the caller tries again).
 */
async function refuseTaken(ctx: StoreContext, q: QueueContext, id: string): Promise<void> {
  const status = await messageStatus(ctx, q, id);
  if (status !== null) throw new FlowRefusedError(q.name, id, status.state);
  if ((await ctx.zk.exists(q.paths.task(id))) !== null) throw new FlowRefusedError(q.name, id, 'staged');
}

/** A flow's multi, each op's owner (a message's index, -1 for shared ops), the list buckets it makes. */
interface FlowPlan {
  readonly ops: ZkOp[];
  readonly owner: number[];
  readonly made: string[];
  readonly waiting: boolean[];
}

/** The flow's multi, each op's message index (-1: shared ops) and the list buckets it makes. */
async function flowOps(
  ctx: StoreContext,
  messages: readonly FlowMessage[],
  queues: ReadonlyMap<string, QueueContext>,
): Promise<FlowPlan> {
  const now = Date.now();
  const deps = await readDependencies(ctx, messages);
  // Each node's children, its dependencies first (enqueued before the flow), and how many it waits for.
  const children = messages.map((_, i): [string, string][] =>
    deps.filter((d) => d.node === i).map((d) => [d.link.queue, d.link.id]),
  );
  const left = messages.map((m, i) => m.children + deps.filter((d) => d.node === i && d.waits).length);
  for (const m of messages) if (m.parent !== null) children[m.parent]?.push([m.queue, m.message.id]);
  const body: ZkOp[] = [];
  const owner: number[] = [];
  const touched = new Set<string>();
  const events = new Map<QueueContext, EventRecord[]>();
  for (const [i, m] of messages.entries()) {
    const q = queues.get(m.queue) as QueueContext;
    const waits = (left[i] ?? 0) > 0;
    // A sub-queue not made yet is made first: a multi's bucket creates need their sub-queue there.
    if (!waits) await madeSub(q, m);
    const taskOps = await newTaskOps(q, m.message, now, fields(messages, i, children[i] ?? [], left[i] ?? 0));
    body.push(...taskOps);
    owner.push(...taskOps.map(() => i));
    if (!waits) touched.add(q.paths.classDir(m.message.filterClass, m.message.priority));
    const list = events.get(q) ?? [];
    list.push({ type: 'enqueued', id: m.message.id, attempt: 0, at: now });
    events.set(q, list);
  }
  const shared: ZkOp[] = [];
  for (const [q, list] of events) shared.push(...q.events.ops(await q.eventsConfig(), list));
  // Touching each sub-queue node is what wakes idle workers' watches.
  for (const path of touched) shared.push({ op: 'set', path, data: Buffer.alloc(0), version: -1 });
  const first: ZkOp[] = [];
  for (const q of queues.values()) first.push(...q.bucketCreates(body));
  const links = linkOps(messages, deps);
  const ops = [...first, ...body, ...links, ...shared];
  const made = first.map((op) => op.path);
  const owners = [...first.map(() => -1), ...owner, ...links.map(() => LINK), ...shared.map(() => -1)];
  return { ops, owner: owners, made, waiting: left.map((n) => n > 0) };
}

/** What a flow node's state adds: its children and how many it waits for, its parent and what it owes it. */
function fields(messages: readonly FlowMessage[], i: number, children: [string, string][], left: number): FlowFields {
  const m = messages[i] as FlowMessage;
  const parent = m.parent === null ? undefined : messages[m.parent];
  return {
    waits: left > 0,
    state: {
      ...(children.length === 0 ? {} : { children }),
      ...(left === 0 ? {} : { childrenLeft: left }),
      ...(parent === undefined
        ? {}
        : {
            parent: [parent.queue, parent.message.id] as const,
            owes: true as const,
            ...(m.onChildFailure === 'fail' ? {} : { onChildFailure: m.onChildFailure }),
          }),
    },
  };
}

/** Makes the sub-queue a flow's message goes into (and its tail bucket) when it is new. */
async function madeSub(q: QueueContext, m: FlowMessage): Promise<void> {
  const sub = q.sub(m.message.filterClass, m.message.priority);
  const tail = await sub.tailBucket();
  if (sub.tailCreate(tail) !== null) await sub.makeTail();
}

/** About how many bytes a multi of `ops` takes on the wire. */
function multiBytes(ops: readonly ZkOp[]): number {
  let bytes = 0;
  for (const op of ops) bytes += opBytes(op);
  return bytes;
}

function opBytes(op: ZkOp): number {
  return OP_BYTES + op.path.length + (op.op === 'create' || op.op === 'set' ? (op.data?.length ?? 0) : 0);
}

/** Refuses, before anything is sent, a flow whose (last) multi would pass ZooKeeper's packet limit. */
function checkSize(nodes: number, ops: readonly ZkOp[], staged: boolean): void {
  const bytes = multiBytes(ops);
  if (bytes <= MULTI_BYTES) return;
  throw new StoreLimitError(
    `a flow of ${nodes} messages needs ${staged ? 'a last' : 'one'} ZooKeeper write of about ${bytes} bytes ` +
      `(its messages' states and index entries; payloads and metadata go ahead in writes of their own), over the ` +
      `packet limit (${MULTI_BYTES} bytes, under jute.maxbuffer); nothing was written: write it as smaller flows`,
  );
}

/** Whether `op` is one a staged multi writes: the task node at `task` and all under it but its `state`. */
function isStaged(op: ZkOp, task: string): boolean {
  return (
    op.op === 'create' && (op.path === task || op.path.startsWith(`${task}/`)) && op.path !== taskNodes(task).state
  );
}

/** The flow's last multi when it is staged: the plan without its staged ops, and the staging's end. */
function lastMulti(
  plan: FlowPlan,
  messages: readonly FlowMessage[],
  queues: ReadonlyMap<string, QueueContext>,
  staging: StagedFlow | null,
): FlowPlan {
  const ops: ZkOp[] = [];
  const owner: number[] = [];
  plan.ops.forEach((op, k) => {
    const i = plan.owner[k] ?? -1;
    const m = messages[i];
    if (m !== undefined && isStaged(op, taskOf(queues, m))) return;
    ops.push(op);
    owner.push(i);
  });
  const end = staging?.finishOps() ?? [];
  return { ...plan, ops: [...ops, ...end], owner: [...owner, ...end.map(() => STAGING)] };
}

/**
 * Writes a flow too big for one multi's staged part: each message's task node, filters, metadata and payload, in
 * as few multis as fit, tied to a staging record (flow-staging.ts). Refused before anything is written when its
 * last multi would not fit; an id found taken removes what was staged and refuses the flow.
 */
async function stageFlow(
  ctx: StoreContext,
  messages: readonly FlowMessage[],
  queues: ReadonlyMap<string, QueueContext>,
  plan: FlowPlan,
): Promise<StagedFlow> {
  // The staging's end adds a remove per staged multi: a few hundred bytes.
  checkSize(messages.length, [...lastMulti(plan, messages, queues, null).ops, ...STAGING_END], true);
  const staged = messages.map((): ZkOp[] => []);
  plan.ops.forEach((op, k) => {
    const m = messages[plan.owner[k] ?? -1];
    if (m !== undefined && isStaged(op, taskOf(queues, m))) {
      staged[plan.owner[k] as number]?.push(op);
    }
  });
  // The root's queue holds the staging record (a flow has one root).
  const root = messages.find((m) => m.parent === null) as FlowMessage;
  const staging = await StagedFlow.begin(ctx, queues.get(root.queue) as QueueContext, messages.length);
  try {
    let chunk: number[] = [];
    let bytes = 0;
    for (const [i, m] of messages.entries()) {
      const size = multiBytes(staged[i] ?? []) + m.queue.length + m.message.id.length + 8;
      if (chunk.length > 0 && bytes + size > MULTI_BYTES - STAGING_CHUNK_BYTES) {
        await writeChunk(ctx, staging, messages, queues, chunk, staged);
        chunk = [];
        bytes = 0;
      }
      chunk.push(i);
      bytes += size;
    }
    if (chunk.length > 0) await writeChunk(ctx, staging, messages, queues, chunk, staged);
  } catch (error) {
    await staging.abort().catch(() => undefined);
    throw error;
  }
  return staging;
}

/** One staged multi: the messages `chunk` names, tried again when an id it found taken went meanwhile. */
async function writeChunk(
  ctx: StoreContext,
  staging: StagedFlow,
  messages: readonly FlowMessage[],
  queues: ReadonlyMap<string, QueueContext>,
  chunk: readonly number[],
  staged: readonly ZkOp[][],
): Promise<void> {
  const links = chunk.map((i): StagedLink => [messages[i]?.queue ?? '', messages[i]?.message.id ?? '']);
  for (let tries = 0; tries < TRIES; tries++) {
    const head = staging.chunkOps(links);
    const ops = [...head, ...chunk.flatMap((i) => staged[i] ?? [])];
    try {
      await ctx.zk.multi(ops);
      staging.noteChunk(head, links);
      return;
    } catch (error) {
      if (!isZkError(error) || error.opIndex < 0) throw error;
      if (error.opIndex < head.length) {
        throw new StoreUnavailableError(
          'flow: its session ended while it was written in stages; nothing of it is visible',
        );
      }
      const failed = ops[error.opIndex];
      const m = chunk.map((i) => messages[i] as FlowMessage).find((n) => failed?.path === taskOf(queues, n));
      if (error.code !== ZkCode.NodeExists || m === undefined) throw error;
      await refuseTaken(ctx, queues.get(m.queue) as QueueContext, m.message.id);
    }
  }
  throw new StoreUnavailableError('flow: the queues kept changing while it was written; try again');
}

function taskOf(queues: ReadonlyMap<string, QueueContext>, m: FlowMessage): string {
  return (queues.get(m.queue) as QueueContext).paths.task(m.message.id);
}
