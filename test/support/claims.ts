/** Playing a consumer by hand through the store, for tests of what a worker would never do. */
import { waitFor } from './wait.js';
import type { Harness } from './harness.js';
import type { ClaimedMessage } from '../../src/stores/contract/contract.js';
import { storeOf } from '../../src/client/client-store.js';

/** Claims one message as `consumerId`, holding it `lockMs`, waiting until there is one to claim. */
export async function claimOne(h: Harness, queue: string, consumerId: string, lockMs: number): Promise<ClaimedMessage> {
  return waitFor(
    async () => {
      const result = await storeOf(h.client).claim(queue, {
        consumerId,
        max: 1,
        lockMs,
        accepts: null,
        eoqBackoffMs: () => 50,
      });
      return result.messages[0];
    },
    { what: `${consumerId} to claim a message` },
  );
}

/** Plays a consumer that claims one message and never comes back, so its lock is lost; returns its attempt. */
export async function claimAndVanish(h: Harness, queue: string, consumerId: string, lockMs = 300): Promise<number> {
  return (await claimOne(h, queue, consumerId, lockMs)).attempt;
}

/** One claim through the store as `consumerId` (no waiting); returns the claimed ids and the store's wakeAt. */
export async function claimIds(
  h: Harness,
  queue: string,
  consumerId: string,
  max: number,
  lockMs = 60_000,
): Promise<{ ids: string[]; wakeAt: number | null }> {
  const result = await storeOf(h.client).claim(queue, {
    consumerId,
    max,
    lockMs,
    accepts: null,
    eoqBackoffMs: () => 50,
  });
  return { ids: result.messages.map((m) => m.id), wakeAt: result.wakeAt };
}

/** Finishes a message held by `consumerId` with success, as a worker would. */
export async function finishOk(h: Harness, queue: string, consumerId: string, id: string, attempt = 1): Promise<void> {
  const results = await storeOf(h.client).finish(queue, consumerId, [
    { id, attempt, outcome: 'success', backoffMs: 0, error: null, startedAt: Date.now() },
  ]);
  if (results[0] !== 'ok') throw new Error(`finishing ${id} as ${consumerId}: ${String(results[0])}`);
}
