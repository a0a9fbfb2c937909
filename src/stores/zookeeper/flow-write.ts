/**
 * Writes a flow on ZooKeeper: every message of the tree, in any queues of the store, in one multi, so it is all
 * there or none of it. A parent is written `waiting` (its entry in `/parents`, none in a sub-queue, so no claim
 * sees it) with its children's (queue, id) and `childrenLeft`; a child records its parent and that it owes it a
 * count (flow-ends.ts). An id that exists fails the multi on its task's create: the flow is refused, nothing
 * written. A flow whose multi would pass ZooKeeper's packet limit (jute.maxbuffer) is refused before it is sent.
 */
import { FlowRefusedError, StoreLimitError } from '../../model/errors.js';
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
  for (let tries = 0, linkTries = 0; tries < TRIES && linkTries < LINK_TRIES; tries++) {
    const { ops, owner, made, waiting } = await flowOps(ctx, messages, queues);
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
        const status = await messageStatus(ctx, queues.get(m.queue) as QueueContext, m.message.id);
        // Removed since: try again.
        if (status !== null) throw new FlowRefusedError(m.queue, m.message.id, status.state);
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
  throw new Error('flow: the queues kept changing while it was written; try again');
}

/**
 * The flow's multi, each op's message index (-1: shared ops) and the list buckets it makes, checked against the packet
 * limit.
 */
async function flowOps(
  ctx: StoreContext,
  messages: readonly FlowMessage[],
  queues: ReadonlyMap<string, QueueContext>,
): Promise<{ ops: ZkOp[]; owner: number[]; made: string[]; waiting: boolean[] }> {
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
  checkSize(messages.length, ops);
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

/** Refuses, before anything is sent, a flow whose multi would pass ZooKeeper's packet limit. */
function checkSize(nodes: number, ops: readonly ZkOp[]): void {
  let bytes = 0;
  for (const op of ops)
    bytes += OP_BYTES + op.path.length + (op.op === 'create' || op.op === 'set' ? (op.data?.length ?? 0) : 0);
  if (bytes <= MULTI_BYTES) return;
  throw new StoreLimitError(
    `a flow of ${nodes} messages needs one ZooKeeper write of about ${bytes} bytes, over the packet limit ` +
      `(${MULTI_BYTES} bytes, under jute.maxbuffer); nothing was written: write it as smaller flows, or with smaller ` +
      'payloads and metadata',
  );
}
