/** Playing a consumer by hand through the store, for tests of what a worker would never do. */
import { waitFor } from './wait.js';
import type { Harness } from './harness.js';
import type { ClaimedMessage } from '../../src/store/contract.js';

/** Claims one message as `consumerId`, holding it `lockMs`, waiting until there is one to claim. */
export async function claimOne(h: Harness, queue: string, consumerId: string, lockMs: number): Promise<ClaimedMessage> {
  return waitFor(
    async () => {
      const result = await h.client.store.claim(queue, {
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
