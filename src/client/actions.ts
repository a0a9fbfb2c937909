/**
 * What the client's actions on messages and queues need besides a store call: the redrive of failed messages in
 * steps, the capability checks of a configuration patch, and an action's one result.
 */
import type { ActionResult, QueueConfig } from '../model/types.js';
import type { Store } from '../stores/contract/contract.js';

// Failed messages redriven per atomic step of retryFailed.
const REDRIVE_BATCH = 500;

/** Queues every failed message of the queue again (queue name already checked); resolves with how many. */
export async function redriveFailed(store: Store, queue: string): Promise<{ retried: number }> {
  // Bounded by what failed before the call, so failures arriving meanwhile cannot keep it going forever.
  const before = (await store.queueStatus(queue)).counts.failed;
  let retried = 0;
  while (retried < before) {
    const moved = await store.retryFailed(queue, Math.min(REDRIVE_BATCH, before - retried));
    if (moved === 0) break;
    retried += moved;
  }
  return { retried };
}

/** Refuses a checked configuration patch that asks for what the store cannot do. */
export function checkPatchFits(store: Store, patch: Partial<QueueConfig>): void {
  if (typeof patch.deadLetterQueue === 'string' && !store.capabilities.deadLetterQueue) {
    throw new TypeError(
      `deadLetterQueue is not available on this ${store.kind} store: it cannot move a message ` +
        'between two queues atomically (a Redis Cluster keeps them in different hash slots)',
    );
  }
}

/** The one result of an action on one message. */
export function one(results: readonly ActionResult[]): ActionResult {
  const [result] = results;
  if (result === undefined) throw new Error('store returned no result for an action');
  return result;
}
