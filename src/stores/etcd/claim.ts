/**
 * An etcd consumer's claim: what the dispatcher delivered to its inbox, asked for when it holds too little, with
 * the queue's pause, rate-limit wake-up and dry runs (end-of-queue backoff) as the queue's watch holds them.
 */
import { parseFilterClass } from '../../model/filters.js';
import { extendDeliveries, releaseDeliveries } from './finish.js';
import { queueSize } from './inspect.js';
import { countDryRun, readConfig, resetDryRuns } from './queue-state.js';
import type { LocalConsumer, Delivery } from './consumer.js';
import type { QueueKeys } from './keys.js';
import type { Kv } from './kv.js';
import type { QueueWatch } from './queue-watches.js';
import type { ClaimRequest, ClaimResult, ClaimedMessage } from '../contract/contract.js';
import type { QueueConfig } from '../../model/types.js';

// How long a claim waits for the dispatcher to answer a request for more messages.
export const ANSWER_WAIT_MS = 1000;
// How soon a claim that got no answer (no dispatcher yet) is worth repeating.
const UNANSWERED_RETRY_MS = 200;
// A queue size the dispatcher reported this recently is used as is.
const QUEUE_SIZE_FRESH_MS = 100;
// A claim on a paused queue asks the worker to look again within this long.
const PAUSED_RETRY_MS = 1000;

export async function claimFromInbox(
  kv: Kv,
  keys: QueueKeys,
  consumer: LocalConsumer,
  state: QueueWatch,
  request: ClaimRequest,
): Promise<ClaimResult> {
  if (state.config?.paused === true) {
    // Paused: nothing is taken, and no dry run counted. Deliveries made before the pause go back unrun.
    const unclaimed = consumer.unclaimed();
    if (unclaimed.length > 0) await releaseDeliveries(kv, keys, consumer, unclaimed);
    return {
      messages: [],
      queueSize: consumer.knownQueueSize(),
      dryRuns: state.eoq.dryRuns,
      wakeAt: Date.now() + PAUSED_RETRY_MS,
    };
  }
  const accepts =
    request.accepts === null ? null : acceptedPairs(state.config ?? (await readConfig(kv, keys)), request.accepts);
  // With group or rate limits a slot freed by another consumer's finish, or a new limit, is the dispatcher's to
  // hand out: ask, so the answer comes after it has seen them (a plain claim takes what its inbox holds).
  const limited =
    state.config?.groupConcurrency != null || state.config?.rateLimit != null || state.config?.groupRateLimit != null;
  const ask = limited && consumer.unclaimedCount() < request.max;
  await consumer.demand({ capacity: consumer.claimedCount() + request.max, lockMs: request.lockMs, accepts }, ask);
  const answered = await consumer.waitForAnswer(ANSWER_WAIT_MS, () => consumer.unclaimedCount() >= request.max);
  const taken = consumer.unclaimed().slice(0, request.max);
  if (taken.length > 0) {
    for (const d of taken) d.claimed = true;
    if (state.eoq.dryRuns !== 0 || state.eoq.until !== 0) await resetDryRuns(kv, keys);
    // The dispatcher locked them when it delivered, perhaps long before this claim: what is left now (read
    // after the claim was made), on this process's clock against the dispatcher's, never more than a lock.
    const now = Date.now();
    const renewed = await renewLate(kv, keys, consumer, taken, request.lockMs, now);
    const messages: ClaimedMessage[] = taken
      .filter((d) => renewed.get(d.id) !== false)
      .map((d) => ({
        id: d.id,
        payload: d.payload,
        encoding: d.record.encoding,
        metadata: d.record.metadata,
        filters: parseFilterClass(d.record.filterClass),
        attempt: d.record.attempt,
        policy: d.record.policy,
        // Renewed during this claim, so after the worker sent it: a whole lock from the worker's send time.
        lockLeftMs:
          renewed.get(d.id) === true
            ? request.lockMs
            : Math.min(request.lockMs, (d.record.lockUntil ?? Infinity) - now),
      }));
    return { messages, queueSize: Math.max(...taken.map((d) => d.queueSize)), dryRuns: 0, wakeAt: null };
  }
  if (!answered) {
    // No dispatcher answered yet (one is being elected): look again soon, without counting a dry run.
    const size = await queueSize(kv, keys);
    return { messages: [], queueSize: size, dryRuns: state.eoq.dryRuns, wakeAt: Date.now() + UNANSWERED_RETRY_MS };
  }
  const rateWakeAt = consumer.rateWakeAt;
  if (rateWakeAt !== null && rateWakeAt > Date.now()) {
    // Held back by the queue's rate limit: sleep until the next slot (its delivery wakes the worker too).
    return { messages: [], queueSize: consumer.knownQueueSize(), dryRuns: state.eoq.dryRuns, wakeAt: rateWakeAt };
  }
  if (consumer.claimedCount() > 0) {
    // Busy, with nothing more for now: its handlers finishing, or a delivery, wake it. Not a dry run.
    return { messages: [], queueSize: consumer.knownQueueSize(), dryRuns: state.eoq.dryRuns, wakeAt: null };
  }
  // The dispatcher's answer says how long the queue was; a count reads it when that is old news.
  const size = consumer.freshQueueSize(QUEUE_SIZE_FRESH_MS) ?? (await queueSize(kv, keys));
  const eoq = await countDryRun(kv, keys, request.eoqBackoffMs);
  state.eoq = eoq.rev >= state.eoq.rev ? eoq : state.eoq;
  return { messages: [], queueSize: size, dryRuns: eoq.dryRuns, wakeAt: eoq.until };
}

/**
 * Deliveries that waited in the consumer's inbox for more than half a lock are renewed before the worker gets
 * them, as a held message's renewal would be: the time they spent unclaimed is not the handler's to lose. The
 * map says, per renewed id, whether this consumer still held it (false: the dispatcher gave it to another). A
 * renewal that fails leaves them as they are; the worker then judges each by the lock it has left.
 */
async function renewLate(
  kv: Kv,
  keys: QueueKeys,
  consumer: LocalConsumer,
  taken: readonly Delivery[],
  lockMs: number,
  now: number,
): Promise<Map<string, boolean>> {
  const renewed = new Map<string, boolean>();
  const late = taken.filter((d) => (d.record.lockUntil ?? Infinity) - now < lockMs / 2);
  if (late.length === 0) return renewed;
  try {
    const held = late.map((d) => ({ id: d.id, attempt: d.record.attempt }));
    const lost = new Set(await extendDeliveries(kv, keys, consumer, held, lockMs));
    for (const d of late) renewed.set(d.id, !lost.has(d.id));
  } catch {
    // The worker's own renewals go on; the lock left as delivered decides.
  }
  return renewed;
}

/** The `name=value` pairs a claim's class matcher accepts, over the queue's configured filter values. */
function acceptedPairs(config: QueueConfig, accepts: (filterClass: string) => boolean): string[] {
  const pairs: string[] = [];
  for (const [name, values] of Object.entries(config.filterEnums)) {
    for (const value of values) if (accepts(`${name}=${value}`)) pairs.push(`${name}=${value}`);
  }
  return pairs.sort();
}
