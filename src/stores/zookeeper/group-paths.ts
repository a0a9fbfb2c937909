/**
 * The nodes of group concurrency (see groups.ts) and of per-group rate limits (group-rates.ts): a leaf, so every
 * writer that removes a claim can use it.
 */
import type { ZkOp } from './client.js';
import type { QueuePaths } from './layout.js';

/** A group as a node name: '.' and '..' are not allowed in ZooKeeper paths ('%' is never in a group). */
function groupNode(group: string): string {
  return group === '.' || group === '..' ? `%${group}` : group;
}

export function groupPath(q: { readonly paths: QueuePaths }, group: string): string {
  return `${q.paths.groups}/${groupNode(group)}`;
}

/** The node of a group's next start time under groupRateLimit. */
export function groupRatePath(q: { readonly paths: QueuePaths }, group: string): string {
  return `${q.paths.groupRates}/${groupNode(group)}`;
}

/** The held node of a task in its group. */
export function heldPath(q: { readonly paths: QueuePaths }, group: string, id: string): string {
  return `${groupPath(q, group)}/${id}`;
}

/** The remove of a locked task's held node, when its claim made one (goes with every remove of its claim). */
export function releaseOps(
  q: { readonly paths: QueuePaths },
  id: string,
  s: { group?: string; grouped?: boolean },
): ZkOp[] {
  return s.grouped === true && s.group !== undefined
    ? [{ op: 'remove', path: heldPath(q, s.group, id), version: -1 }]
    : [];
}
