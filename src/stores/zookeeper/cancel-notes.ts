/**
 * Cancel notes: a cancel of a held message creates `/consumers/<holder>/canceled-<attempt>-<task>` in its multi,
 * a persistent child of the holder's consumer node, which the holder's process watches (cancel-watches.ts) and
 * removes once heard. A leaf: the cancel, the watches and GC use it.
 */
import { isZkError, ZkCode, type ZkSession } from './client.js';
import { removeQuietly } from './tree.js';
import type { CanceledMessage } from '../contract/contract.js';
import type { QueuePaths } from './layout.js';

const PREFIX = 'canceled-';

/** The note a cancel of `id` at `attempt` leaves its holder `consumer`. */
export function cancelNotePath(paths: QueuePaths, consumer: string, attempt: number, id: string): string {
  return `${paths.consumer(consumer)}/${PREFIX}${attempt}-${id}`;
}

/** The message a child of a consumer node names, or null when it is no cancel note (`current`). */
export function parseCancelNote(node: string): CanceledMessage | null {
  if (!node.startsWith(PREFIX)) return null;
  const rest = node.slice(PREFIX.length);
  const dash = rest.indexOf('-');
  const attempt = Number(rest.slice(0, dash));
  if (dash <= 0 || !Number.isSafeInteger(attempt)) return null;
  return { id: rest.slice(dash + 1), attempt };
}

/**
 * Removes a consumer node whose `current` is gone, with the cancel notes its process never heard (it ended
 * first). A live consumer's node (its `current` there) stays; one already gone is no error.
 */
export async function removeConsumerNode(zk: ZkSession, path: string): Promise<void> {
  try {
    await zk.remove(path, -1);
    return;
  } catch (error) {
    if (isZkError(error, ZkCode.NoNode)) return;
    if (!isZkError(error, ZkCode.NotEmpty)) throw error;
  }
  const { children } = await zk.children(path).catch((error: unknown) => {
    if (isZkError(error, ZkCode.NoNode)) return { children: [] as string[] };
    throw error;
  });
  if (children.length === 0 || children.includes('current')) return;
  await Promise.all(children.filter((c) => parseCancelNote(c) !== null).map((c) => removeQuietly(zk, `${path}/${c}`)));
  // Not quietly: a consumer that registered again meanwhile keeps its node.
  await zk.remove(path, -1).catch((error: unknown) => {
    if (!isZkError(error, ZkCode.NoNode) && !isZkError(error, ZkCode.NotEmpty)) throw error;
  });
}
