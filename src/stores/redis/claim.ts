import { list, num, storedContent, text } from './codec.js';
import { SCRIPTS } from './scripts.generated.js';
import type { Scripts } from './scripts.js';
import type { ClaimedMessage, ClaimRequest, ClaimResult } from '../contract/contract.js';
import { eoqSteps } from '../contract/eoq-steps.js';

/**
 * Claims with one script call. A consumer that filters names the ready lists
 * it accepts, from the queue's filter classes it knows (`classes`, kept per
 * queue); when the queue has classes it has not seen, the script says so
 * instead of claiming, and the call is made again with them. A consumer that
 * takes handoffs (`park`, see handoffs.ts) and accepts every class is parked
 * when the claim leaves it with free slots and nothing to take.
 */
export async function claimMessages(
  scripts: Scripts,
  classes: Map<string, string[]>,
  queue: string,
  request: ClaimRequest,
  where: string,
  handoffs = '',
): Promise<ClaimResult> {
  const eoq = eoqSteps(request);
  for (;;) {
    const known = classes.get(queue) ?? [];
    const accepted = request.accepts === null ? ['*'] : ['', ...known].filter(request.accepts);
    const args = [request.consumerId, request.max, request.lockMs, known.length, ...eoq, handoffs, ...accepted];
    const reply = list(await scripts.run(SCRIPTS.claim, queue, args));
    if (text(reply[0]) === 'classes') {
      classes.set(
        queue,
        reply
          .slice(1)
          .map((c) => text(c) ?? '')
          .sort(),
      );
      continue;
    }
    const messages: ClaimedMessage[] = [];
    for (let i = 4; i + 6 <= reply.length; i += 6) messages.push(claimed(reply, i, where, request.lockMs));
    const wakeAt = num(reply[3]);
    return {
      messages,
      queueSize: num(reply[1]),
      dryRuns: num(reply[2]),
      // Set with messages too when the claim drained the queue (fewer than asked): see ClaimResult.wakeAt.
      wakeAt: wakeAt < 0 ? null : wakeAt,
    };
  }
}

/**
 * The message whose six fields (id, content, metadata, filter class, attempt, policy) start at `at`, locked for
 * `lockLeftMs` from when the request that locked it was sent (the script locks until its own TIME + lock ms).
 */
export function claimed(reply: readonly unknown[], at: number, where: string, lockLeftMs: number): ClaimedMessage {
  // Read in place and built as one object: a claim reply carries up to concurrency + prefetch messages.
  const { payload, encoding, metadata, filters } = storedContent(reply[at + 1], reply[at + 2], reply[at + 3], where);
  return {
    id: text(reply[at]) ?? '',
    payload,
    encoding,
    metadata,
    filters,
    attempt: num(reply[at + 4]),
    policy: text(reply[at + 5]),
    lockLeftMs,
  };
}
