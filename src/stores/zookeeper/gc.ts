/**
 * GC under `/dir/lock`, at the interval stored in `conf/task_gc_interval`:
 * one multi sets the lock's last-run time (with a version check: an unforced
 * GC runs only when the interval has passed since anyone's last run) and
 * creates the ephemeral `lock/gc` (one GC at a time; a crashed GC's lock goes
 * with its session). Then it removes done tasks older than the lifetime, walking
 * the done list from its oldest bucket; frees claims whose lock expired long
 * ago (stale claims of stalled consumers); removes lapsed consumers and the staged nodes of big flows whose
 * writer's session ended (flow-staging.ts); and trims
 * the queue's events to its `eventsMaxCount` and `eventsMaxAgeMs` (events.ts).
 */
import { endOwingChildren } from './clear-flows.js';
import { sweepStagedFlows } from './flow-staging.js';
import { reportRemovals } from './reports.js';
import { expireWaiting } from './expiry.js';
import { isZkError, ZkCode, type ZkOp } from './client.js';
import { decodeState, parseSubNode, taskNodes, type Entry, type TaskState } from './layout.js';
import { parseFilterClass } from '../../model/filters.js';
import { removeConsumerNode } from './cancel-notes.js';
import { mapLimit, removeAll, removeQuietly, subtree } from './tree.js';
import { readConfig } from './conf.js';
import { indexRemovals } from './debounce-index.js';
import { releaseOps } from './group-paths.js';
import { resetRateOp } from './rate.js';
import { pruneGroupRates } from './group-rates.js';
import { pruneGroups } from './groups.js';
import type { BucketedList } from './buckets.js';
import type { StoreContext } from './context.js';
import type { QueueContext } from './queue.js';
import type { GcResult } from '../../model/types.js';

// Tasks deleted per multi.
const TASKS_PER_MULTI = 50;
// Entries of a sub-queue's oldest bucket a GC looks at for stale claims.
const STALE_CLAIMS_LOOKED_AT = 256;

export async function runGc(ctx: StoreContext, q: QueueContext, force: boolean): Promise<GcResult> {
  if (!(await q.exists())) return { ran: false, removed: 0 };
  const zk = ctx.zk;
  const config = await readConfig(zk, q);
  const now = Date.now();
  const { data, stat } = await zk.get(q.paths.lock);
  const gcAt = parseGcAt(data);
  if (!force && gcAt + config.gcIntervalMs > now) return { ran: false, removed: 0 };
  try {
    await zk.multi([
      { op: 'set', path: q.paths.lock, data: Buffer.from(JSON.stringify({ gcAt: now })), version: stat.version },
      { op: 'create', path: q.paths.gcLock, data: Buffer.from(zk.sessionId), kind: 'ephemeral' },
    ]);
  } catch (error) {
    // Another GC runs now, or just ran.
    if (isZkError(error, ZkCode.NodeExists) || isZkError(error, ZkCode.BadVersion)) return { ran: false, removed: 0 };
    throw error;
  }
  try {
    // Expired messages first: one failed now is removed with the failed ones once past its lifetime.
    await expireWaiting(ctx, q);
    const removed =
      (await removeOldTasks(ctx, q, q.done, 'done', config.gcLifetimeMs, config.keepDone)) +
      (await removeOldTasks(ctx, q, q.failed, 'failed', config.failedLifetimeMs, config.keepFailed));
    await freeStaleClaims(ctx, q, config.gcLifetimeMs);
    await pruneWaiting(ctx, q);
    await pruneGroupRates(zk, q);
    await pruneGroups(zk, q);
    await removeLapsedConsumers(ctx, q);
    await sweepStagedFlows(ctx, q);
    await q.events.trim(config);
    return { ran: true, removed };
  } finally {
    await removeQuietly(zk, q.paths.gcLock);
  }
}

function parseGcAt(data: Buffer): number {
  try {
    return (JSON.parse(data.toString('utf8')) as { gcAt?: number }).gcAt ?? 0;
  } catch {
    return 0;
  }
}

/** Removes tasks of `list` (the done or failed list) finished more than `lifetimeMs` ago, oldest first. */
async function removeOldTasks(
  ctx: StoreContext,
  q: QueueContext,
  list: BucketedList,
  phase: 'done' | 'failed',
  lifetimeMs: number,
  keep: number | null,
): Promise<number> {
  const zk = ctx.zk;
  let removed = 0;
  const buckets = await list.buckets();
  // With `keep`, the entries before the newest `keep` go whatever their age (counted now, not cached).
  const beyond = keep === null ? 0 : (await list.size(buckets, 0)) - keep;
  let rank = 0;
  for (const [i, bucket] of buckets.entries()) {
    const now = Date.now();
    const entries = await list.list(bucket);
    // In finish order, so both are a prefix of the entries.
    const old = entries.filter((e, k) => rank + k < beyond || e.at <= now - lifetimeMs);
    rank += entries.length;
    // Asked together: they travel in a few requests.
    const states = await zk.getMany(old.map((entry) => taskNodes(q.paths.task(entry.id)).state));
    const reads = old.map((entry, k) => {
      const read = states[k];
      return read === null || read === undefined
        ? { entry, state: null, version: -1 }
        : { entry, state: decodeState(entry.path, read.data), version: read.version };
    });
    const stale: string[] = [];
    const doomed: { entry: Entry; state: TaskState; version: number }[] = [];
    for (const read of reads) {
      const { entry, state } = read;
      const current =
        state !== null && state.phase === phase && state.done !== null && entry.path.startsWith(state.done);
      if (!current) stale.push(entry.path);
      else if (state.backoffUntil <= now) doomed.push({ entry, state, version: read.version });
    }
    await removeAll(zk, stale);
    for (let k = 0; k < doomed.length; k += TASKS_PER_MULTI) {
      removed += await removeTasks(ctx, q, doomed.slice(k, k + TASKS_PER_MULTI));
    }
    if (old.length < entries.length) break; // younger entries follow
    if (i < buckets.length - 1) await list.dropIfEmpty(bucket);
  }
  return removed;
}

/** Deletes whole tasks and their done entries in one multi; each checked against the state version GC read. */
async function removeTasks(
  ctx: StoreContext,
  q: QueueContext,
  tasks: readonly { entry: Entry; state: TaskState; version: number }[],
): Promise<number> {
  // Handlers' reports, where there are some, go first: a task node is removed once it has no children.
  const reports = await reportRemovals(
    ctx.zk,
    tasks.map((t) => q.paths.task(t.entry.id)),
  );
  const ops: ZkOp[] = reports.concat(
    tasks.flatMap(({ entry, state, version }) => {
      const taskPath = q.paths.task(entry.id);
      const nodes = taskNodes(taskPath);
      return [
        { op: 'check', path: nodes.state, version },
        ...Object.keys(parseFilterClass(state.filterClass)).map((name): ZkOp => ({
          op: 'remove',
          path: `${nodes.filters}/${name}`,
          version: -1,
        })),
        { op: 'remove', path: nodes.filters, version: -1 },
        { op: 'remove', path: nodes.state, version: -1 },
        { op: 'remove', path: nodes.metadata, version: -1 },
        { op: 'remove', path: nodes.data, version: -1 },
        { op: 'remove', path: taskPath, version: -1 },
        { op: 'remove', path: entry.path, version: -1 },
      ];
    }),
  );
  // Debounce index nodes that still name these tasks go with them.
  ops.push(
    ...(await indexRemovals(
      ctx.zk,
      q,
      tasks.map((t) => ({ id: t.entry.id, state: t.state })),
    )),
  );
  try {
    await ctx.zk.multi(ops);
    return tasks.length;
  } catch (error) {
    if (!isZkError(error)) throw error;
    if (tasks.length === 1) {
      // Revived or requeued meanwhile (BAD_VERSION), or an unexpected child: leave it to the next GC.
      return 0;
    }
    let removed = 0;
    for (const task of tasks) removed += await removeTasks(ctx, q, [task]);
    return removed;
  }
}

/**
 * A claim whose lock ended long ago (its consumer stalled but its session
 * lives) is freed here, so the message does not look held. Only the oldest
 * bucket of each sub-queue is looked at (its oldest entries): that is where
 * such messages sit; and only entries ready before the grace began (a lock
 * starts after its entry is ready), whose claim exists.
 */
async function freeStaleClaims(ctx: StoreContext, q: QueueContext, graceMs: number): Promise<void> {
  const zk = ctx.zk;
  const { children } = await zk.children(q.paths.queue);
  for (const node of children) {
    const key = parseSubNode(node);
    const sub = q.sub(key.filterClass, key.priority, key.lifo);
    const [first] = await sub.buckets();
    if (first === undefined) continue;
    const oldEnough = Date.now() - graceMs;
    // Claims take over expired locks by themselves; this only tidies the oldest few.
    const entries = (await sub.list(first)).filter((e) => e.at < oldEnough).slice(0, STALE_CLAIMS_LOOKED_AT);
    await mapLimit(entries, 32, async (entry) => {
      const nodes = taskNodes(q.paths.task(entry.id));
      try {
        const claim = await zk.exists(nodes.claim);
        if (claim === null) return;
        const { data, stat } = await zk.get(nodes.state);
        const state = decodeState(nodes.state, data);
        if (state.phase !== 'locked' || state.lockUntil + graceMs > Date.now()) return;
        await zk.multi([
          { op: 'check', path: nodes.state, version: stat.version },
          { op: 'remove', path: nodes.claim, version: claim.version },
          ...releaseOps(q, entry.id, state),
        ]);
      } catch (error) {
        if (!isZkError(error)) throw error;
      }
    });
  }
}

/** `/waiting` entries whose backoff has ended say nothing any more: they go, and emptied buckets with them. */
async function pruneWaiting(ctx: StoreContext, q: QueueContext): Promise<void> {
  const buckets = await q.waiting.buckets();
  for (const [i, bucket] of buckets.entries()) {
    const entries = await q.waiting.list(bucket);
    const now = Date.now();
    const ended = entries.filter((e) => e.at <= now);
    await removeAll(
      ctx.zk,
      ended.map((e) => e.path),
    );
    for (const e of ended) q.waiting.forget(e);
    if (ended.length === entries.length && i < buckets.length - 1) await q.waiting.dropIfEmpty(bucket);
  }
}

/** Consumers whose `current` is gone (their session ended) leave the registry. */
async function removeLapsedConsumers(ctx: StoreContext, q: QueueContext): Promise<void> {
  const zk = ctx.zk;
  const { children } = await zk.children(q.paths.consumers);
  // A consumer whose `current` lives stays; cancel notes it never heard go with a lapsed one.
  await mapLimit(children, 32, (node) => removeConsumerNode(zk, `${q.paths.consumers}/${node}`));
}

/** Removes every message of a queue, and its events; its configuration and consumers stay. */
export async function clearQueue(ctx: StoreContext, q: QueueContext): Promise<void> {
  if (!(await q.exists())) return;
  const zk = ctx.zk;
  const paths = [
    ...(await subtree(zk, q.paths.queue, true)),
    ...(await subtree(zk, q.paths.tasks, true)),
    ...(await subtree(zk, q.paths.done, true)),
    ...(await subtree(zk, q.paths.failed, true)),
    ...(await subtree(zk, q.paths.waiting, true)),
    ...(await subtree(zk, q.paths.expiry, true)),
    ...(await subtree(zk, q.paths.parents, true)),
    ...(await subtree(zk, q.paths.debounce, true)),
    ...(await subtree(zk, q.paths.groupRates, true)),
  ];
  // Its flow children end for their parents first, as removals, rather than leave them waiting: after the listing,
  // so every child it removes was there to be ended (a flow written after the listing stays, still owing).
  await endOwingChildren(ctx, q);
  await removeAll(zk, paths);
  // Its events go too; the mark they leave tells a reader behind them that it missed some.
  await q.events.clear();
  await zk.set(q.paths.queue, Buffer.from(JSON.stringify({ dryRuns: 0, eoqUntil: 0 })), -1);
  // The rate limits start afresh (the groups' nodes went above).
  try {
    await zk.multi([resetRateOp(q.paths)]);
  } catch (error) {
    // No /rate (removed by hand): nothing to reset.
    if (!isZkError(error, ZkCode.NoNode)) throw error;
  }
  q.reset();
  ctx.claims.clearQueue(q.name);
}
