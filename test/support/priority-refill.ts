/**
 * The priority guarantee under refills, for any store: a message whose enqueue completed before a claim started
 * is never passed over by that claim for a lower priority. A worker drains priority 600 while a producer (another
 * client) refills priority 500, which the worker drained before; the queue's event log gives the claims in
 * commit order with the time each began (`started` events).
 */
import { waitFor } from './wait.js';
import type { Client, Handler, Worker } from '../../src/index.js';

export interface RefillOptions {
  readonly rounds: number;
  /** Messages of priority 600 per round, then of the refill (priority 500). */
  readonly low: number;
  readonly urgent: number;
}

/**
 * Runs the rounds on `queue` (events must be on) with a worker `work` starts; returns the 600 messages whose
 * claim began after a refill completed and committed while a message of that refill waited (none is right).
 */
export async function passedOverByRefills(
  producer: Client,
  queue: string,
  work: (handler: Handler) => Worker,
  options: RefillOptions,
): Promise<string[]> {
  const handled = new Set<string>();
  const worker = work(async (job) => {
    await new Promise((resolve) => setTimeout(resolve, 2));
    handled.add(job.id);
  });
  const rounds: { urgent: Set<string>; low: Set<string>; refilledAt: number }[] = [];
  try {
    for (let round = 0; round < options.rounds; round++) {
      const low = Array.from({ length: options.low }, (_, i) => `r${round}-low${i}`);
      const urgent = Array.from({ length: options.urgent }, (_, i) => `r${round}-urgent${i}`);
      await producer.enqueueBatch(
        queue,
        low.map((id) => ({ payload: 0, id, priority: 600 })),
      );
      // The worker is busy on 600 (and found 500 empty) when the refill comes.
      await waitFor(() => low.filter((id) => handled.has(id)).length >= 8, { what: 'the worker busy on 600' });
      await producer.enqueueBatch(
        queue,
        urgent.map((id) => ({ payload: 0, id, priority: 500 })),
      );
      rounds.push({ urgent: new Set(urgent), low: new Set(low), refilledAt: Date.now() });
      await waitFor(() => [...low, ...urgent].every((id) => handled.has(id)), {
        timeoutMs: 10_000,
        what: `round ${round} drained`,
      });
    }
  } finally {
    await worker.stop();
  }
  const started: { id: string; at: number }[] = [];
  for (let after: string | undefined; ;) {
    const page = await producer.readEvents(queue, after === undefined ? { limit: 1000 } : { after, limit: 1000 });
    started.push(...page.events.filter((e) => e.type === 'started').map((e) => ({ id: e.id, at: e.at })));
    if (page.events.length === 0) break;
    after = page.cursor;
  }
  const passedOver: string[] = [];
  for (const { urgent, low, refilledAt } of rounds) {
    const lastUrgent = started.findLastIndex((e) => urgent.has(e.id));
    started.forEach((e, k) => {
      // Began after the refill completed (times in ms: strictly after), committed before a refilled one.
      if (low.has(e.id) && e.at > refilledAt && k < lastUrgent) passedOver.push(e.id);
    });
  }
  return passedOver;
}
