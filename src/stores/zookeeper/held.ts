/** A consumer's hold on a message, as this store keeps it and as the server has it. */
import { isZkError, ZkCode } from './client.js';
import { decodeState, taskNodes } from './layout.js';
import type { Held, StoreContext } from './context.js';
import type { QueueContext } from './queue.js';

/** The claim as this store holds it; re-read from the server when missing or stale (`reread`). */
export async function heldFor(
  ctx: StoreContext,
  q: QueueContext,
  consumer: string,
  id: string,
  attempt: number,
  reread = false,
): Promise<Held | null> {
  const known = ctx.getHeld(q.name, consumer, id);
  if (known !== undefined && known.attempt === attempt && !reread) return known;
  const nodes = taskNodes(q.paths.task(id));
  try {
    const [read, claim] = await Promise.all([ctx.zk.get(nodes.state), ctx.zk.exists(nodes.claim)]);
    const state = decodeState(nodes.state, read.data);
    const ours =
      state.phase === 'locked' &&
      state.consumer === consumer &&
      state.attempt === attempt &&
      claim !== null &&
      claim.ephemeralOwner === ctx.zk.sessionId &&
      known !== undefined &&
      known.epoch === ctx.zk.epoch;
    if (!ours) {
      ctx.dropHeld(q.name, consumer, id, attempt);
      return null;
    }
    const held: Held = { ...known, stateVersion: read.stat.version, state };
    ctx.setHeld(held);
    return held;
  } catch (error) {
    if (isZkError(error, ZkCode.NoNode)) {
      ctx.dropHeld(q.name, consumer, id, attempt);
      return null;
    }
    throw error;
  }
}
