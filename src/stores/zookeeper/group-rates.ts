/**
 * Per-group rate limits (`groupRateLimit`): `/group-rates/<group>` holds the time (ms) the group's next message
 * may start (model/rate-limit.ts spacedGrant). A claim of a grouped message reads it and, when that time has
 * come, sets it one interval on in the claim's own multi, with the version read (or creates it): of two claims
 * that read the same time, in one process or in many, only one commits, so a group's starts stay spaced across
 * every worker. A message whose group's time has not come is skipped until then. GC deletes the nodes whose
 * time has passed (they say no more than no node), so a group that stopped sending leaves nothing behind.
 */
import { isZkError, ZkCode, type ZkSession } from './client.js';
import { groupRatePath } from './group-paths.js';
import { spacedGrant } from '../../model/rate-limit.js';
import type { PreparedClaim } from './claim-build.js';
import type { StoreContext } from './context.js';
import type { QueueContext } from './queue.js';
import type { RateLimit } from '../../model/types.js';

interface RateRead {
  tat: number;
  /** The node's data version, or null when it does not exist. */
  readonly version: number | null;
  /** Whether a claim of this batch starts a message of the group (then no other may). */
  charged: boolean;
}

/**
 * Adds the charge of its group's rate to each claim whose group's time has come (one per group: the next waits
 * an interval), and drops the others, their entries skipped until their group's time. Returns the claims kept
 * and when the first dropped one may start (Infinity: none dropped).
 */
export async function planGroupRates(
  ctx: StoreContext,
  q: QueueContext,
  claims: readonly PreparedClaim[],
  limit: RateLimit | null,
): Promise<{ kept: PreparedClaim[]; wakeAt: number }> {
  if (limit === null) return { kept: [...claims], wakeAt: Infinity };
  const groups = [...new Set(claims.flatMap((p) => p.read.state.group ?? []))];
  if (groups.length === 0) return { kept: [...claims], wakeAt: Infinity };
  const reads = await ctx.zk.getMany(groups.map((group) => groupRatePath(q, group)));
  const rates = new Map<string, RateRead>(groups.map((group, i) => [group, parseRate(reads[i] ?? null)]));
  const now = Date.now();
  const kept: PreparedClaim[] = [];
  let wakeAt = Infinity;
  for (const p of claims) {
    const group = p.read.state.group;
    const rate = group === undefined ? undefined : rates.get(group);
    if (group === undefined || rate === undefined) {
      kept.push(p);
      continue;
    }
    const grant = spacedGrant(limit, rate.tat, now);
    if (!grant.granted || rate.charged) {
      const until = Math.ceil(grant.tat);
      ctx.claims.skipForRate(p.candidate.entry.path, until);
      wakeAt = Math.min(wakeAt, until);
      continue;
    }
    const path = groupRatePath(q, group);
    const data = Buffer.from(String(grant.tat));
    const ops = [...p.ops];
    ops.push(rate.version === null ? { op: 'create', path, data } : { op: 'set', path, data, version: rate.version });
    rate.tat = grant.tat;
    rate.charged = true;
    kept.push({ ...p, ops });
  }
  return { kept, wakeAt };
}

function parseRate(read: { readonly data: Buffer; readonly version: number } | null): RateRead {
  if (read === null) return { tat: 0, version: null, charged: false };
  const tat = Number(read.data.toString('utf8'));
  return { tat: Number.isFinite(tat) ? tat : 0, version: read.version, charged: false };
}

/** GC: the nodes of groups whose next start has come go (unless a claim charged them meanwhile). */
export async function pruneGroupRates(zk: ZkSession, q: QueueContext): Promise<void> {
  const children = await zk.childrenIfAny(q.paths.groupRates);
  const paths = children.map((name) => `${q.paths.groupRates}/${name}`);
  const reads = await zk.getMany(paths);
  const now = Date.now();
  for (const [i, read] of reads.entries()) {
    const path = paths[i];
    if (read === null || path === undefined || parseRate(read).tat > now) continue;
    try {
      await zk.remove(path, read.version);
    } catch (error) {
      // Charged again since the read (BadVersion), or gone: either way nothing to do.
      if (!isZkError(error, ZkCode.BadVersion) && !isZkError(error, ZkCode.NoNode)) throw error;
    }
  }
}
