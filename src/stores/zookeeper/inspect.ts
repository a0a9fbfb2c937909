/** status, queueStatus and the consumer registry (`consumers/<id>` with its ephemeral `current`). */
import { decodeReport } from '../contract/report-codec.js';
import {
  MESSAGE_STATES,
  type ConsumerInfo,
  type MessageState,
  type MessageStatus,
  type Metadata,
} from '../../model/types.js';
import { parseFilterClass } from '../../model/filters.js';
import { resultFromRecord } from '../../model/result.js';
import { isZkError, ZkCode } from './client.js';
import {
  consumerOfNode,
  decodeState,
  deriveState,
  priorityOf,
  stateEndsAt,
  taskNodes,
  type TaskState,
} from './layout.js';
import { mapLimit } from './tree.js';
import { removeConsumerNode } from './cancel-notes.js';
import { putBackAll } from './handoff.js';
import { registrationKey, type StoreContext } from './context.js';
import type { QueueContext } from './queue.js';
import type { ConsumerRegistration, StoredContent, StoredDetails } from '../contract/contract.js';

export async function messageStatus(ctx: StoreContext, q: QueueContext, id: string): Promise<MessageStatus | null> {
  const nodes = taskNodes(q.paths.task(id));
  // One request (status calls of one tick share it): the state, and the claim if there is one.
  const [read, claim = null] = await ctx.zk.getMany([nodes.state, nodes.claim]);
  if (read === null || read === undefined) return null;
  return statusOf(q, id, decodeState(nodes.state, read.data), claim !== null, Date.now());
}

/** A task's status from its state node and whether its claim exists. */
export function statusOf(
  q: QueueContext,
  id: string,
  s: TaskState,
  claimed: boolean,
  now: number,
  withResult = true,
): MessageStatus {
  const state = deriveState(s, claimed, now);
  return {
    queue: q.name,
    id,
    state,
    attempt: s.attempt,
    outcome: s.outcome,
    lastError: s.lastError,
    enqueuedAt: s.enqueuedAt,
    updatedAt: s.updatedAt,
    consumer: state === 'locked' || state === 'locked-with-requeue' ? s.consumer : null,
    until: stateEndsAt(s, claimed, now),
    ...(withResult ? resultFromRecord(s) : {}),
  };
}

/** A task's content from its `data` and `metadata` nodes. */
export function contentOf(s: TaskState, data: Buffer, metadata: Buffer): StoredContent {
  return {
    payload: data,
    encoding: s.encoding,
    metadata: JSON.parse(metadata.toString('utf8') || '{}') as Metadata,
    filters: parseFilterClass(s.filterClass),
  };
}

/** Everything about one task, read in one request (state first, so the rest is at least as new). */
export async function inspectMessage(ctx: StoreContext, q: QueueContext, id: string): Promise<StoredDetails | null> {
  const nodes = taskNodes(q.paths.task(id));
  const [read, claim, data, metadata, report] = await ctx.zk.getMany([
    nodes.state,
    nodes.claim,
    nodes.data,
    nodes.metadata,
    nodes.report,
  ]);
  if (read == null || data == null || metadata == null) return null;
  const s = decodeState(nodes.state, read.data);
  return {
    status: statusOf(q, id, s, claim != null, Date.now()),
    content: contentOf(s, data.data, metadata.data),
    policy: s.policy ?? null,
    history: s.history ?? [],
    priority: priorityOf(s),
    group: s.group ?? null,
    report: decodeReport(report?.data),
  };
}

/**
 * Counts per state from the index sub-trees, never reading the ready backlog
 * or the done and failed sets: entries per list are the child counts of
 * their buckets (one `exists` per bucket of at most 2,000 entries); only
 * messages in time-limited states are read: those the live consumers hold
 * (locked, from their `current` nodes) and the backoffs in `/waiting`.
 * Queued is what remains of the sub-queues.
 */
export async function stateCounts(
  ctx: StoreContext,
  q: QueueContext,
  consumers: readonly ConsumerInfo[],
): Promise<Record<MessageState, number>> {
  const counts = Object.fromEntries(MESSAGE_STATES.map((s) => [s, 0])) as Record<MessageState, number>;
  if (!(await q.exists())) return counts;
  const classes = await childrenOf(ctx, q.paths.queue);
  const [pending, done, failed, parents, held, waiting] = await Promise.all([
    Promise.all(classes.map((node) => entriesIn(ctx, `${q.paths.queue}/${node}`))),
    entriesIn(ctx, q.paths.done),
    entriesIn(ctx, q.paths.failed),
    entriesIn(ctx, q.paths.parents),
    heldStates(ctx, q, consumers),
    waitingStates(ctx, q),
  ]);
  for (const state of [...held, ...waiting]) counts[state] += 1;
  const inSubQueues = pending.reduce((a, b) => a + b, 0);
  const timed =
    counts.locked + counts['locked-with-requeue'] + counts['queued-with-backoff'] + counts['done-with-requeue'];
  // The reads are not one snapshot: a count never goes below 0.
  counts.queued = Math.max(0, inSubQueues - timed);
  counts['done-awaiting-gc'] = Math.max(0, done - counts['done-with-backoff']);
  counts.failed = failed;
  counts['waiting-children'] = parents;
  return counts;
}

/** Entries of a bucketed list: the child counts of its buckets. */
async function entriesIn(ctx: StoreContext, dir: string): Promise<number> {
  const buckets = await childrenOf(ctx, dir);
  const stats = await mapLimit(buckets, 64, (bucket) => ctx.zk.exists(`${dir}/${bucket}`));
  return stats.reduce((n, stat) => n + (stat?.numChildren ?? 0), 0);
}

/** The states of the messages live consumers hold (locked, unless their lock ended). */
async function heldStates(
  ctx: StoreContext,
  q: QueueContext,
  consumers: readonly ConsumerInfo[],
): Promise<MessageState[]> {
  const ids = [...new Set(consumers.flatMap((c) => c.holding))];
  const reads = await ctx.zk.getMany(
    ids.flatMap((id) => [taskNodes(q.paths.task(id)).state, `${q.paths.task(id)}/claim`]),
  );
  const now = Date.now();
  return ids.flatMap((id, k) => {
    const read = reads[2 * k];
    if (read == null) return [];
    const s = decodeState(q.paths.task(id), read.data);
    const state = deriveState(s, reads[2 * k + 1] != null, now);
    return state === 'locked' || state === 'locked-with-requeue' ? [state] : [];
  });
}

/** The states of the messages whose backoff in `/waiting` has not ended, each message once. */
async function waitingStates(ctx: StoreContext, q: QueueContext): Promise<MessageState[]> {
  const now = Date.now();
  const until = new Map<string, number>();
  for (const bucket of await q.waiting.buckets()) {
    for (const entry of await q.waiting.list(bucket)) if (entry.at > now) until.set(entry.id, entry.at);
  }
  const ids = [...until.keys()];
  const reads = await ctx.zk.getMany(ids.map((id) => taskNodes(q.paths.task(id)).state));
  return ids.flatMap((id, k) => {
    const read = reads[k];
    if (read == null) return [];
    const s = decodeState(q.paths.task(id), read.data);
    // Only the backoff the entry was made for: a message that moved on since is counted where it is now.
    const ends = s.phase === 'pending' ? s.readyAt : s.phase === 'done' ? s.backoffUntil : 0;
    const state = deriveState(s, false, now);
    return ends > now &&
      (state === 'queued-with-backoff' || state === 'done-with-requeue' || state === 'done-with-backoff')
      ? [state]
      : [];
  });
}

/** The node's children; none when it does not exist (yet). */
export function childrenOf(ctx: StoreContext, path: string): Promise<string[]> {
  return ctx.zk.childrenIfAny(path);
}

interface ConsumerNode {
  readonly host: string;
  readonly pid: number;
  readonly startedAt: number;
}

interface CurrentNode {
  readonly holding: string[];
  readonly lastSeenAt: number;
}

/** Live consumers: those whose ephemeral `current` exists. */
export async function liveConsumers(ctx: StoreContext, q: QueueContext): Promise<ConsumerInfo[]> {
  let nodes: string[];
  try {
    nodes = (await ctx.zk.children(q.paths.consumers)).children;
  } catch (error) {
    if (isZkError(error, ZkCode.NoNode)) return [];
    throw error;
  }
  const infos = await mapLimit(nodes, 32, async (node): Promise<ConsumerInfo | null> => {
    const path = `${q.paths.consumers}/${node}`;
    try {
      const [consumer, current] = await Promise.all([ctx.zk.get(path), ctx.zk.get(`${path}/current`)]);
      const c = JSON.parse(consumer.data.toString('utf8')) as ConsumerNode;
      const cur = JSON.parse(current.data.toString('utf8')) as CurrentNode;
      return {
        id: consumerOfNode(node),
        host: c.host,
        pid: c.pid,
        startedAt: c.startedAt,
        lastSeenAt: cur.lastSeenAt,
        holding: cur.holding,
      };
    } catch (error) {
      if (isZkError(error, ZkCode.NoNode) || error instanceof SyntaxError) return null;
      throw error;
    }
  });
  return infos.filter((c): c is ConsumerInfo => c !== null).sort((a, b) => a.startedAt - b.startedAt);
}

// Tries at registering against GC removing the consumer node between its two creates.
const REGISTER_ATTEMPTS = 5;

/**
 * Registers (or renews) a consumer: `consumers/<id>` holds who it is, and its
 * ephemeral `current` what it holds and when it was last seen; the session
 * keeps it alive, so it vanishes when the consumer's process dies.
 */
export async function registerConsumer(ctx: StoreContext, q: QueueContext, c: ConsumerRegistration): Promise<void> {
  await q.ensure();
  const zk = ctx.zk;
  const path = q.paths.consumer(c.id);
  const current = q.paths.current(c.id);
  const key = registrationKey(q.name, c.id);
  const epoch = zk.epoch;
  const data = ctx.currentData(q.name, c.id);
  if (ctx.registered.get(key)?.epoch === epoch) {
    try {
      await zk.set(current, data, -1);
      return;
    } catch (error) {
      if (!isZkError(error, ZkCode.NoNode)) throw error;
    }
  }
  const info = Buffer.from(JSON.stringify({ host: c.host, pid: c.pid, startedAt: Date.now() }));
  for (let attempt = 1; ; attempt++) {
    await zk.ensure(path, info);
    try {
      await zk.create(current, data, 'ephemeral');
      break;
    } catch (error) {
      // NO_NODE: a GC took `consumers/<id>` for a lapsed consumer while it was still empty; make it again.
      if (isZkError(error, ZkCode.NoNode) && attempt < REGISTER_ATTEMPTS) continue;
      if (!isZkError(error, ZkCode.NodeExists)) throw error;
      // Left by this consumer's earlier, expired session: replace it with one of this session.
      await zk.remove(current, -1).catch(() => undefined);
      if (attempt >= REGISTER_ATTEMPTS) throw error;
    }
  }
  ctx.registered.set(key, { epoch, host: c.host, pid: c.pid });
}

export async function unregisterConsumer(ctx: StoreContext, q: QueueContext, id: string): Promise<void> {
  // Messages its last finishes claimed for it, which it will not collect now, go back as they were.
  await putBackAll(ctx, q, id);
  ctx.claims.forgetConsumer(q.name, id);
  ctx.registered.delete(registrationKey(q.name, id));
  try {
    await ctx.zk.remove(q.paths.current(id), -1);
  } catch (error) {
    if (!isZkError(error, ZkCode.NoNode)) throw error;
  }
  // With the cancel notes it has not heard yet.
  await removeConsumerNode(ctx.zk, q.paths.consumer(id));
}
