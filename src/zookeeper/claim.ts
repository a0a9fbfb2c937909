/**
 * Claim: walk the sub-queues the consumer accepts (never one its filters
 * exclude), oldest entries first, from cached bucket listings; for each
 * candidate read its state, then in one multi create the ephemeral `claim`
 * and write `state` with a version check. The entry stays in the queue while
 * the message is locked, so a dead session (its claim vanishes) or an expired
 * lock (lockUntil passed) frees it with no one else's help.
 */
import { parseFilterClass } from '../model/filters.js';
import { isZkError, ZkCode, type ZkOp } from './client.js';
import { classOfNode, decodeState, deriveState, encodeState, makeState, taskNodes, type Entry } from './layout.js';
import type { BucketedList } from './buckets.js';
import type { StoreContext } from './context.js';
import type { QueueContext } from './queue.js';
import type { ClaimRequest, ClaimResult, ClaimedMessage } from '../store/contract.js';
import type { Metadata } from '../model/types.js';

interface Counters {
  dryRuns: number;
  eoqUntil: number;
}

interface Candidate {
  readonly entry: Entry;
  readonly sub: BucketedList;
}

/** Per store: entries another consumer holds (skipped until their lock ends or their claim goes), and claims under way. */
export class ClaimCache {
  readonly lockedUntil = new Map<string, number>();
  readonly trying = new Set<string>();
}

export async function claimMessages(
  ctx: StoreContext,
  cache: ClaimCache,
  q: QueueContext,
  request: ClaimRequest,
): Promise<ClaimResult> {
  await q.ensure();
  const zk = ctx.zk;
  const now = Date.now();
  const [queueNode, classNodes] = await Promise.all([zk.get(q.paths.queue), zk.children(q.paths.queue)]);
  const counters = parseCounters(queueNode.data);
  const classes = classNodes.children.map(classOfNode);
  const accepted = classes.filter((c) => request.accepts === null || request.accepts(c));

  let wakeAt = Infinity;
  let queueSize = 0;
  const candidates: Candidate[] = [];
  const want = request.max + 4;
  const versions = new Map<string, number>();
  for (const filterClass of classes) {
    const sub = q.sub(filterClass);
    const { buckets, version } = await sub.bucketsAndVersion();
    versions.set(filterClass, version);
    if (version !== sub.seenVersion) {
      sub.markTailDirty(buckets);
      sub.seenVersion = version;
    }
    if (accepted.includes(filterClass)) {
      for (const bucket of buckets) {
        const entries = await sub.cached(bucket);
        if (entries.length === 0 && bucket !== buckets[buckets.length - 1]) await sub.dropIfEmpty(bucket);
        for (const entry of entries) {
          if (entry.at > now) {
            wakeAt = Math.min(wakeAt, entry.at);
            continue;
          }
          const until = cache.lockedUntil.get(entry.path);
          if (until !== undefined && until > now) {
            wakeAt = Math.min(wakeAt, until);
            continue;
          }
          if (!cache.trying.has(entry.path)) candidates.push({ entry, sub });
        }
        if (candidates.length >= want) break;
      }
    }
    queueSize += await sub.size(buckets);
  }

  candidates.sort(
    (a, b) => a.entry.at - b.entry.at || a.entry.bucket.localeCompare(b.entry.bucket) || a.entry.seq - b.entry.seq,
  );
  const messages: ClaimedMessage[] = [];
  let next = 0;
  while (messages.length < request.max && next < candidates.length) {
    const batch = candidates.slice(next, next + request.max - messages.length);
    next += batch.length;
    const taken = await Promise.all(batch.map((c) => claimOne(ctx, cache, q, c, request, now)));
    for (const result of taken) {
      if (result === null) continue;
      if (typeof result === 'number') wakeAt = Math.min(wakeAt, result);
      else messages.push(result);
    }
  }

  if (messages.length > 0) {
    if (counters.dryRuns !== 0 || counters.eoqUntil !== 0) {
      await zk.set(q.paths.queue, Buffer.from(JSON.stringify({ dryRuns: 0, eoqUntil: 0 })), -1);
    }
    return { messages, queueSize, dryRuns: 0, wakeAt: null };
  }
  return {
    messages,
    queueSize,
    ...(await dryRun(ctx, q, request, accepted, versions, classNodes.stat.cversion, wakeAt)),
  };
}

/**
 * Takes one entry's message. Null when someone else has it (or it is gone);
 * a number when it becomes free later (its lock ends then).
 */
async function claimOne(
  ctx: StoreContext,
  cache: ClaimCache,
  q: QueueContext,
  { entry, sub }: Candidate,
  request: ClaimRequest,
  now: number,
): Promise<ClaimedMessage | number | null> {
  const zk = ctx.zk;
  const taskPath = q.paths.task(entry.id);
  const nodes = taskNodes(taskPath);
  cache.trying.add(entry.path);
  try {
    // Asked in this order on one session, so data and metadata are at least as new as the state read.
    let reads;
    try {
      reads = await Promise.all([
        zk.get(nodes.state),
        zk.exists(nodes.claim),
        zk.get(nodes.data),
        zk.get(nodes.metadata),
      ]);
    } catch (error) {
      if (!isZkError(error, ZkCode.NoNode)) throw error;
      await dropStale(ctx, sub, entry);
      return null;
    }
    const [stateRead, claim, data, metadata] = reads;
    const state = decodeState(nodes.state, stateRead.data);
    if (state.entry === null || entry.path.length !== state.entry.length + 10 || !entry.path.startsWith(state.entry)) {
      // The task moved on (finished, retried): this entry is left over.
      await dropStale(ctx, sub, entry);
      return null;
    }
    if (state.phase === 'done') {
      await dropStale(ctx, sub, entry);
      return null;
    }
    if (state.phase === 'pending' && state.readyAt > now) return state.readyAt;
    if (state.phase === 'locked' && deriveState(state, claim !== null, now) !== 'queued') {
      // Held by another consumer: skip it until its lock ends, or its claim goes (a dead session).
      cache.lockedUntil.set(entry.path, state.lockUntil);
      if (claim !== null) void ctx.wakeups.armClaim(q.name, nodes.claim, () => cache.lockedUntil.delete(entry.path));
      return state.lockUntil;
    }
    const next = makeState(
      {
        ...state,
        phase: 'locked',
        lockUntil: now + request.lockMs,
        consumer: request.consumerId,
        attempt: state.attempt + 1,
        // A message whose lock expired keeps its requeue mark; a pending one starts clean.
        requeue: state.phase === 'locked' ? state.requeue : false,
        updatedAt: now,
      },
      now,
    );
    const ops: ZkOp[] = [];
    if (claim !== null) ops.push({ op: 'remove', path: nodes.claim, version: claim.version });
    ops.push({ op: 'create', path: nodes.claim, data: Buffer.from(request.consumerId), kind: 'ephemeral' });
    const stateOp =
      ops.push({ op: 'set', path: nodes.state, data: encodeState(next), version: stateRead.stat.version }) - 1;
    const current = ctx.currentPath(q.name, request.consumerId);
    if (current !== null) {
      ops.push({
        op: 'set',
        path: current,
        data: ctx.currentData(q.name, request.consumerId, [entry.id]),
        version: -1,
      });
    }
    const epoch = zk.epoch;
    let results;
    try {
      results = await zk.multi(ops);
    } catch (error) {
      if (!isZkError(error)) throw error;
      // Someone else took it first (NODE_EXISTS, BAD_VERSION) or it went away: not ours.
      if (error.code === ZkCode.NoNode && ops[error.opIndex]?.path === current) {
        ctx.registered.delete(`${q.name}\u0000${request.consumerId}`);
      }
      return null;
    }
    ctx.setHeld({
      queue: q.name,
      consumer: request.consumerId,
      id: entry.id,
      attempt: next.attempt,
      epoch,
      taskPath,
      entryPath: entry.path,
      stateVersion: results[stateOp]?.version ?? stateRead.stat.version + 1,
      state: next,
    });
    cache.lockedUntil.delete(entry.path);
    return {
      id: entry.id,
      payload: data.data,
      encoding: state.encoding,
      metadata: JSON.parse(metadata.data.toString('utf8') || '{}') as Metadata,
      filters: parseFilterClass(state.filterClass),
      attempt: next.attempt,
    };
  } finally {
    cache.trying.delete(entry.path);
  }
}

/** An entry that no longer matches its task: forget it, delete it, and read its bucket again next time. */
async function dropStale(ctx: StoreContext, sub: BucketedList, entry: Entry): Promise<void> {
  sub.forget(entry);
  sub.markDirty(entry.bucket);
  try {
    await ctx.zk.remove(entry.path, -1);
  } catch (error) {
    if (!isZkError(error, ZkCode.NoNode)) throw error;
  }
}

/**
 * Nothing to take: count a dry run once per queue-wide end-of-queue backoff,
 * arm the wake-up watches, and say when to look again anyway.
 */
async function dryRun(
  ctx: StoreContext,
  q: QueueContext,
  request: ClaimRequest,
  accepted: readonly string[],
  versions: ReadonlyMap<string, number>,
  cversion: number,
  wakeAt: number,
): Promise<{ dryRuns: number; wakeAt: number }> {
  const zk = ctx.zk;
  let dryRuns = 0;
  let eoqUntil = 0;
  for (let tries = 0; tries < 10; tries++) {
    const now = Date.now();
    const { data, stat } = await zk.get(q.paths.queue);
    ({ dryRuns, eoqUntil } = parseCounters(data));
    if (eoqUntil > now) break;
    dryRuns += 1;
    eoqUntil = now + request.eoqBackoffMs(dryRuns);
    try {
      await zk.set(q.paths.queue, Buffer.from(JSON.stringify({ dryRuns, eoqUntil })), stat.version);
      break;
    } catch (error) {
      // Another worker counted this dry run: read what it wrote.
      if (!isZkError(error, ZkCode.BadVersion)) throw error;
    }
  }
  let next = Math.min(wakeAt, eoqUntil);
  // Watches set now, compared with what this claim read: anything newer means look again at once.
  const armed = await Promise.all([
    ctx.wakeups.armChildren(q.name, q.paths.queue),
    ...accepted.map((c) => ctx.wakeups.armData(q.name, q.paths.classDir(c))),
  ]);
  const queueVersion = armed[0] ?? null;
  if (queueVersion !== null && queueVersion !== cversion) next = Date.now();
  accepted.forEach((c, i) => {
    const version = armed[i + 1];
    if (version !== null && version !== undefined && version !== versions.get(c)) next = Date.now();
  });
  return { dryRuns, wakeAt: next };
}

function parseCounters(data: Buffer): Counters {
  try {
    const parsed = JSON.parse(data.toString('utf8')) as Partial<Counters>;
    return { dryRuns: parsed.dryRuns ?? 0, eoqUntil: parsed.eoqUntil ?? 0 };
  } catch {
    return { dryRuns: 0, eoqUntil: 0 };
  }
}
