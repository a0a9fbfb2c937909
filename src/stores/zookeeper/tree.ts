/** Whole subtrees: recursive deletion in multis, and bounded parallel reads. */
import { isZkError, ZkCode, type ZkOp, type ZkSession } from './client.js';

// Removes per multi: small enough to stay far below the packet limit.
const REMOVES_PER_MULTI = 500;

/** Every node under `path` (children before parents), `path` itself last unless `keepRoot`. */
export async function subtree(zk: ZkSession, path: string, keepRoot: boolean): Promise<string[]> {
  const out: string[] = [];
  const visit = async (node: string): Promise<void> => {
    let children: string[];
    try {
      children = (await zk.children(node)).children;
    } catch (error) {
      if (isZkError(error, ZkCode.NoNode)) return;
      throw error;
    }
    await mapLimit(children, 64, (child) => visit(`${node === '/' ? '' : node}/${child}`));
    out.push(node);
  };
  await visit(path);
  if (keepRoot) out.pop();
  return out;
}

/** Deletes the nodes under `path` (and `path` unless keepRoot); nodes already gone are fine. */
export async function removeTree(zk: ZkSession, path: string, keepRoot = false): Promise<void> {
  await removeAll(zk, await subtree(zk, path, keepRoot));
}

/** Removes paths given children-first, in multis; on a conflict, one by one. */
export async function removeAll(zk: ZkSession, paths: readonly string[]): Promise<void> {
  for (let i = 0; i < paths.length; i += REMOVES_PER_MULTI) {
    const chunk = paths.slice(i, i + REMOVES_PER_MULTI);
    const ops: ZkOp[] = chunk.map((p) => ({ op: 'remove', path: p, version: -1 }));
    try {
      await zk.multi(ops);
    } catch (error) {
      if (!isZkError(error)) throw error;
      for (const p of chunk) await removeQuietly(zk, p);
    }
  }
}

export async function removeQuietly(zk: ZkSession, path: string): Promise<void> {
  try {
    await zk.remove(path, -1);
  } catch (error) {
    if (isZkError(error, ZkCode.NoNode)) return;
    if (isZkError(error, ZkCode.NotEmpty)) return removeTree(zk, path);
    throw error;
  }
}

/** Runs `fn` over `items` with at most `limit` at once; results in order. */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const run = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, run));
  return results;
}
