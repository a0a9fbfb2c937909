/**
 * The counts queueStatus reads instead of walking the backlog: how many records of a queue are live (pending
 * or locked: in the ordered queue), done, failed, and failed with their payload stuck at a producer key. The
 * other states split these by time (backoffs, locks), from the small ranges inspect.ts reads.
 *
 * Kept as running totals per writer slot, `/queue/{q}/kvmq/counts/{writer}.{n}`, each put in the Txn of the
 * transitions it counts (counter-slots.ts), plus a base, `/queue/{q}/kvmq/count`: the recount of a queue
 * written before counts existed, and the totals of slots folded into it by GC. The base's presence says the
 * queue is counted. A queue's counts are the base plus the sum of its slots.
 */
import { prefixEnd, type KeyValue, type Op } from './kv.js';
import type { QueueKeys } from './keys.js';
import type { MessageRecord } from './record.js';

export interface Counts {
  /** Pending or locked: records with an ordered key. */
  readonly live: number;
  readonly done: number;
  readonly failed: number;
  /** Failed, the payload left at a plain producer's key (also counted in `failed`). */
  readonly stuck: number;
}

export const ZERO: Counts = { live: 0, done: 0, failed: 0, stuck: 0 };

/** What a Txn changes in one queue's counts. */
export interface CountDelta {
  readonly keys: QueueKeys;
  readonly delta: Counts;
}

/** The part of a record the counts follow. */
export type Counted = Pick<MessageRecord, 'phase' | 'payloadKey'>;

/** A message moved to a dead-letter queue: queued there (transitions.ts, deadLetterOps). */
export const DEAD_LETTERED: Counted = { phase: 'pending', payloadKey: null };

export function countBaseKey(keys: QueueKeys): string {
  return `${keys.prefix}kvmq/count`;
}

export function countSlotsPrefix(keys: QueueKeys): string {
  return `${keys.prefix}kvmq/counts/`;
}

// The counts of one record, one object per kind: countChange runs for every message of every Txn.
const LIVE: Counts = { live: 1, done: 0, failed: 0, stuck: 0 };
const DONE: Counts = { live: 0, done: 1, failed: 0, stuck: 0 };
const FAILED: Counts = { live: 0, done: 0, failed: 1, stuck: 0 };
const STUCK: Counts = { live: 0, done: 0, failed: 1, stuck: 1 };

function countsOf(r: Counted | null): Counts {
  if (r === null) return ZERO;
  switch (r.phase) {
    // A flow's waiting parent: counted from its index (inspect.ts), not here; a staged message is not visible yet.
    case 'waiting':
    case 'staged':
      return ZERO;
    case 'pending':
    case 'locked':
      return LIVE;
    case 'done':
      return DONE;
    case 'failed':
      return r.payloadKey === null ? FAILED : STUCK;
  }
}

export function addCounts(a: Counts, b: Counts, sign = 1): Counts {
  return {
    live: a.live + sign * b.live,
    done: a.done + sign * b.done,
    failed: a.failed + sign * b.failed,
    stuck: a.stuck + sign * b.stuck,
  };
}

export function isZero(c: Counts): boolean {
  return c.live === 0 && c.done === 0 && c.failed === 0 && c.stuck === 0;
}

/** A message's record going from `before` to `after` (null: absent), as the change of its queue's counts. */
export function countChange(keys: QueueKeys, before: Counted | null, after: Counted | null): CountDelta[] {
  const delta = addCounts(countsOf(after), countsOf(before), -1);
  return isZero(delta) ? [] : [{ keys, delta }];
}

/** A value as slots and the base hold it; `at`: when written (the writer's clock), for GC's fold. */
export function encodeCounts(c: Counts, at: number): Buffer {
  return Buffer.from(JSON.stringify({ o: c.live, d: c.done, f: c.failed, s: c.stuck, t: at }), 'utf8');
}

export function decodeCounts(value: Buffer): { counts: Counts; at: number } {
  try {
    const raw = JSON.parse(value.toString('utf8')) as Record<string, unknown>;
    const n = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
    return { counts: { live: n(raw.o), done: n(raw.d), failed: n(raw.f), stuck: n(raw.s) }, at: n(raw.t) };
  } catch {
    return { counts: ZERO, at: 0 };
  }
}

/** The reads of a queue's counts, for a Txn: the base, then the slots. */
export function countReads(keys: QueueKeys): Op[] {
  const slots = countSlotsPrefix(keys);
  return [
    { type: 'range', key: countBaseKey(keys) },
    { type: 'range', key: slots, end: prefixEnd(slots) },
  ];
}

/** The counts from the answers of countReads: null when the queue has no base yet (not counted). */
export function sumCounts(base: readonly KeyValue[], slots: readonly KeyValue[]): Counts | null {
  const first = base[0];
  if (first === undefined) return null;
  let total = decodeCounts(first.value).counts;
  for (const slot of slots) total = addCounts(total, decodeCounts(slot.value).counts);
  return total;
}

/** clear(): every slot goes and the base starts again from zero (the queue stays counted). */
export function resetCountOps(keys: QueueKeys): Op[] {
  const slots = countSlotsPrefix(keys);
  return [
    { type: 'delete', key: slots, end: prefixEnd(slots) },
    { type: 'put', key: countBaseKey(keys), value: encodeCounts(ZERO, Date.now()) },
  ];
}
