/**
 * Turns: `<queue>/turns/<name>` holds, as decimal ms on the taker's clock,
 * when the turn was last taken. Taking it writes the node with the version
 * just read (or creates it when absent), so of two processes that read the
 * same time only one write succeeds: at most one taker per `everyMs`, with
 * the clocks' skew as the only slack.
 */
import { isZkError, ZkCode, type ZkSession } from './client.js';
import type { QueueContext } from './queue.js';

/** A turn's name as a node name: '.' and '..' are not allowed in ZooKeeper paths ('%' is never in a name). */
function nodeOf(name: string): string {
  return name === '.' || name === '..' ? `%${name}` : name;
}

export async function takeTurn(zk: ZkSession, q: QueueContext, name: string, everyMs: number): Promise<boolean> {
  await q.ensure();
  const path = `${q.paths.turns}/${nodeOf(name)}`;
  const now = Date.now();
  let read;
  try {
    read = await zk.get(path);
  } catch (error) {
    if (!isZkError(error, ZkCode.NoNode)) throw error;
    return takeFirst(zk, q, path, now);
  }
  const last = Number(read.data.toString('utf8'));
  if (Number.isFinite(last) && now < last + everyMs) return false;
  try {
    await zk.set(path, Buffer.from(String(now)), read.stat.version);
    return true;
  } catch (error) {
    // Another process took it since the read (BAD_VERSION), or a clear removed it.
    if (isZkError(error, ZkCode.BadVersion) || isZkError(error, ZkCode.NoNode)) return false;
    throw error;
  }
}

/** Nobody took this turn yet: the create decides, so only one first taker wins. */
async function takeFirst(zk: ZkSession, q: QueueContext, path: string, now: number): Promise<boolean> {
  try {
    await zk.create(path, Buffer.from(String(now)));
    return true;
  } catch (error) {
    if (isZkError(error, ZkCode.NodeExists)) return false;
    if (!isZkError(error, ZkCode.NoNode)) throw error;
  }
  // No `turns` node (removed by hand): make it, and race again.
  await zk.ensure(q.paths.turns);
  try {
    await zk.create(path, Buffer.from(String(now)));
    return true;
  } catch (error) {
    if (isZkError(error, ZkCode.NodeExists)) return false;
    throw error;
  }
}
