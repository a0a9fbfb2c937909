/**
 * The priority guarantee against the mirror's lag: a delivery of priority p
 * is planned from what the watches had shown, so a message of a higher
 * priority whose enqueue completed just before may be unknown to it. The
 * delivery's Txn therefore compares, over the ordered keys of every higher
 * priority (one range), that each was created by the revision the mirror has
 * seen; a key created later fails the Txn, and the dispatcher holds such
 * deliveries until its watch has shown that key (then plans again).
 */
import { priorityBand } from '../keys.js';
import type { Compare, RangeOp, RangeResult } from '../kv.js';
import type { QueueKeys } from '../keys.js';

export interface PriorityGuard {
  readonly compare: Compare;
  /** Read when the Txn fails: the keys of that range written since (to learn which revision to wait for). */
  readonly read: RangeOp;
}

/** The guard of a delivery of `priority` planned from a mirror that has seen up to `seen`; null for priority 0. */
export function priorityGuard(keys: QueueKeys, priority: number, seen: number): PriorityGuard | null {
  if (priority === 0) return null;
  const key = keys.orderedStart;
  // Priority 0 (19-digit idx) and every band `9{q:4}` with q < priority sort before this band.
  const end = keys.prefix + priorityBand(priority);
  return {
    compare: { key, end, target: 'create', result: '<', operand: seen + 1 },
    read: { type: 'range', key, end, keysOnly: true, minModRevision: seen + 1 },
  };
}

/** From a failed Txn's guard read: the newest create revision after `seen` (the Txn failed on it), or 0. */
export function unseenRevision(read: RangeResult | undefined, seen: number): number {
  let newest = 0;
  for (const kv of read?.kvs ?? []) if (kv.createRevision > seen) newest = Math.max(newest, kv.createRevision);
  return newest;
}
