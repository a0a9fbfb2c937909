/**
 * Group concurrency: `/groups/<group>` has one EPHEMERAL child per held message of the group, named by its task
 * id, created in the claim multi and removed with the task's `claim` (finish, take-over of an expired lock, GC
 * of a stale claim); a dead consumer's children go with its session, as its claims do. A claim of a grouped
 * message counts the children and, when the group has room, sets the group node's data with the version read
 * in the same multi: two claims that read the same count cannot both commit, so the group never holds more than
 * `groupConcurrency`. A removal only lowers the count, so finishes need no version. A group found full gets a
 * child watch: its next removal wakes this process's idle workers, and its entries are skipped meanwhile. GC
 * deletes the nodes of groups that hold nothing (pruneGroups), so groups that stopped sending leave nothing.
 */
import { isZkError, ZkCode, type ZkSession } from './client.js';
import { encodeState } from './layout.js';
import { groupPath, heldPath } from './group-paths.js';
import type { PreparedClaim } from './claim-build.js';
import type { StoreContext } from './context.js';
import type { QueueContext } from './queue.js';

interface GroupRead {
  /** Held messages, by task id. */
  readonly held: ReadonlySet<string>;
  /** The group node's data version, or null when it does not exist yet. */
  readonly version: number | null;
  /** Claims of this batch planned in the group so far. */
  planned: number;
}

/**
 * Adds the group ops to a batch's claims, in the order their multis go out, and drops those whose group is
 * full (their entries are skipped until the group's watch fires). Returns the claims kept.
 */
export async function planGroups(
  ctx: StoreContext,
  q: QueueContext,
  claims: readonly PreparedClaim[],
  limit: number | null,
): Promise<PreparedClaim[]> {
  if (limit === null) return [...claims];
  const groups = new Set<string>();
  for (const p of claims) if (p.read.state.group !== undefined) groups.add(p.read.state.group);
  if (groups.size === 0) return [...claims];
  const reads = new Map<string, GroupRead>();
  await Promise.all(
    [...groups].map(async (group) => {
      reads.set(group, await readGroup(ctx, q, group));
    }),
  );
  const kept: PreparedClaim[] = [];
  for (const p of claims) {
    const group = p.read.state.group;
    const read = group === undefined ? undefined : reads.get(group);
    if (group === undefined || read === undefined) {
      kept.push(p);
      continue;
    }
    const id = p.candidate.entry.id;
    // Its own held node, left by a claim whose lock ended, is removed by this claim (buildClaim): it does not count.
    const own = read.held.has(id);
    if (read.held.size - (own ? 1 : 0) + read.planned >= limit) {
      blockGroup(ctx, q, group, p.candidate.entry.path);
      continue;
    }
    const path = groupPath(q, group);
    const next = { ...p.next, grouped: true };
    const ops = [...p.ops];
    const stateOp = ops[p.stateOp];
    if (stateOp?.op === 'set') ops[p.stateOp] = { ...stateOp, data: encodeState(next) };
    if (read.version === null && read.planned === 0) ops.push({ op: 'create', path });
    else {
      const version = read.version === null ? read.planned - 1 : read.version + read.planned;
      ops.push({ op: 'set', path, data: Buffer.alloc(0), version });
    }
    ops.push({ op: 'create', path: heldPath(q, group, id), kind: 'ephemeral' });
    read.planned += 1;
    kept.push({ ...p, ops, next });
  }
  return kept;
}

async function readGroup(ctx: StoreContext, q: QueueContext, group: string): Promise<GroupRead> {
  const path = groupPath(q, group);
  try {
    const { children, stat } = await ctx.zk.children(path, watchGroup(ctx, q, path));
    return { held: new Set(children), version: stat.version, planned: 0 };
  } catch (error) {
    if (!isZkError(error, ZkCode.NoNode)) throw error;
    ctx.claims.groupWatches.delete(path);
    return { held: new Set(), version: null, planned: 0 };
  }
}

/** A child watch on the group unless one is set: when it fires, its blocked entries are claimable again. */
function watchGroup(ctx: StoreContext, q: QueueContext, path: string): (() => void) | undefined {
  const cache = ctx.claims;
  if (cache.groupWatches.has(path)) return undefined;
  cache.groupWatches.add(path);
  return () => {
    cache.groupWatches.delete(path);
    // Only a group some claim found full has idle workers to wake.
    if (cache.unblockGroup(path)) ctx.wakeups.notify(q.name);
  };
}

/** The group is full: skip this entry until a held message of the group goes (its watch fires). */
function blockGroup(ctx: StoreContext, q: QueueContext, group: string, entryPath: string): void {
  const path = groupPath(q, group);
  // A watch that fired since the read may have missed a removal: then the entry is looked at again next time.
  if (ctx.claims.groupWatches.has(path)) ctx.claims.blockForGroup(path, entryPath);
}

// Group nodes a GC tries to delete at most, so a queue of very many groups spreads the work over its GCs.
const GROUPS_PRUNED_PER_GC = 1000;
const REMOVES_AT_ONCE = 50;

/**
 * GC: a group node with no held message says no more than no node, so it goes; one a claim holds a message in
 * meanwhile is left (ZooKeeper refuses to delete a node with children), and a claim that read the node before
 * it went fails its multi and reads afresh next time.
 */
export async function pruneGroups(zk: ZkSession, q: QueueContext): Promise<void> {
  const children = await zk.childrenIfAny(q.paths.groups);
  const paths = children.slice(0, GROUPS_PRUNED_PER_GC).map((name) => `${q.paths.groups}/${name}`);
  for (let i = 0; i < paths.length; i += REMOVES_AT_ONCE) {
    await Promise.all(paths.slice(i, i + REMOVES_AT_ONCE).map((path) => removeIfEmpty(zk, path)));
  }
}

async function removeIfEmpty(zk: ZkSession, path: string): Promise<void> {
  try {
    await zk.remove(path, -1);
  } catch (error) {
    if (!isZkError(error, ZkCode.NotEmpty) && !isZkError(error, ZkCode.NoNode)) throw error;
  }
}
