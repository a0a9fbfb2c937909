/**
 * The queue's rate limit (`rate_limit` in `conf`) as a GCRA (model/rate-limit.ts): `/rate` holds the theoretical
 * arrival time `tat` in ms. A claim reads it, takes at most what `rateGrant` allows, and each of its claim
 * multis sets it to the `tat` after that many claims, with the version read plus the claims before it (a
 * session's multis run in order), so two claims that read the same `tat` cannot both spend it. A claim that
 * may take nothing says when the next slot comes (`wakeAt`), and the worker sleeps until then.
 */
import { isZkError, ZkCode, type ZkOp, type ZkSession } from './client.js';
import { rateCharge, type RateGrant } from '../../model/rate-limit.js';
import type { QueuePaths } from './layout.js';
import type { RateLimit } from '../../model/types.js';

export interface RateRead {
  readonly tat: number;
  /** The data version of `/rate`, or null when it does not exist. */
  readonly version: number | null;
}

export async function readRate(zk: ZkSession, paths: QueuePaths): Promise<RateRead> {
  try {
    const { data, stat } = await zk.get(paths.rate);
    const tat = Number(data.toString('utf8'));
    return { tat: Number.isFinite(tat) ? tat : 0, version: stat.version };
  } catch (error) {
    if (!isZkError(error, ZkCode.NoNode)) throw error;
    return { tat: 0, version: null };
  }
}

/** The op that charges the k-th claim (0-based, in the order the multis go out) of a batch under `grant`. */
export function chargeOp(paths: QueuePaths, limit: RateLimit, grant: RateGrant, read: RateRead, k: number): ZkOp {
  const data = Buffer.from(String(rateCharge(limit, grant, k + 1)));
  if (read.version === null && k === 0) return { op: 'create', path: paths.rate, data };
  return { op: 'set', path: paths.rate, data, version: read.version === null ? k - 1 : read.version + k };
}

/** `clear` starts the limit afresh. */
export function resetRateOp(paths: QueuePaths): ZkOp {
  return { op: 'set', path: paths.rate, data: Buffer.from('0'), version: -1 };
}
