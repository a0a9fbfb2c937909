/**
 * The reader's side of the counts (counts.ts): the base and the slots summed (inspect.ts reads them in its
 * status Txn), the one-time recount of a queue written before counts existed, and GC's fold of idle slots
 * into the base, which keeps the slots read by queueStatus about as many as the writers alive.
 */
import {
  addCounts,
  countBaseKey,
  countReads,
  countSlotsPrefix,
  decodeCounts,
  encodeCounts,
  isZero,
  ZERO,
  type Counts,
} from './counts.js';
import { prefixEnd, type Kv, type Op } from './kv.js';
import type { QueueKeys } from './keys.js';

// A slot not written for this long is folded into the base at GC (its writer, if alive, reads it again).
const FOLD_AFTER_MS = 60_000;
// Slots folded per Txn: a compare and a delete each, within etcd's 128.
const FOLD_PER_TXN = 100;

/**
 * Counts a queue that has no base yet (written by a kvmq before counts), at `revision`: the ordered queue
 * and the done, failed and stuck indexes, walked once. The base becomes that recount less the slots at the
 * same revision, so the base plus the slots is the count from then on. Returns the counts at `revision`.
 */
export async function recount(kv: Kv, keys: QueueKeys, revision: number): Promise<Counts> {
  const count = (key: string, end: string): Op => ({ type: 'range', key, end, countOnly: true, revision });
  const slots = countSlotsPrefix(keys);
  const res = await kv.txn({
    compare: [],
    success: [
      count(keys.orderedStart, keys.orderedEnd),
      count(keys.doneIndex, prefixEnd(keys.doneIndex)),
      count(keys.failedIndex, prefixEnd(keys.failedIndex)),
      count(keys.stuckIndex, prefixEnd(keys.stuckIndex)),
      { type: 'range', key: slots, end: prefixEnd(slots), revision },
    ],
  });
  const ranges = res.responses.map((r) => (r.type === 'range' ? r : { kvs: [], count: 0 }));
  const n = (i: number): number => ranges[i]?.count ?? 0;
  const counted: Counts = { live: n(0), done: n(1), failed: n(2), stuck: n(3) };
  const slotKvs = ranges[4]?.kvs ?? [];
  // Nothing to count (an unknown queue): a read leaves no key behind; the next one counts again, at no cost.
  if (slotKvs.length === 0 && isZero(counted)) return counted;
  let written = ZERO;
  for (const slot of slotKvs) written = addCounts(written, decodeCounts(slot.value).counts);
  // Another reader may have made the base meanwhile: it holds the same, so either one stands.
  await kv.txn({
    compare: [{ key: countBaseKey(keys), target: 'version', result: '=', operand: 0 }],
    success: [
      { type: 'put', key: countBaseKey(keys), value: encodeCounts(addCounts(counted, written, -1), Date.now()) },
    ],
  });
  return counted;
}

/** GC: slots idle for a minute go into the base, each fold one Txn comparing the base and the slots it takes. */
export async function foldCounts(kv: Kv, keys: QueueKeys, now: number): Promise<void> {
  const read = await kv.txn({ compare: [], success: countReads(keys) });
  const [baseRes, slotsRes] = read.responses;
  let base = baseRes?.type === 'range' ? baseRes.kvs[0] : undefined;
  // Not counted yet: the first queueStatus recounts it.
  if (base === undefined) return;
  const idle = (slotsRes?.type === 'range' ? slotsRes.kvs : []).filter(
    (slot) => decodeCounts(slot.value).at < now - FOLD_AFTER_MS,
  );
  for (let i = 0; i < idle.length; i += FOLD_PER_TXN) {
    const chunk = idle.slice(i, i + FOLD_PER_TXN);
    let total = decodeCounts(base.value).counts;
    for (const slot of chunk) total = addCounts(total, decodeCounts(slot.value).counts);
    const value = encodeCounts(total, now);
    const res = await kv.txn({
      compare: [base, ...chunk].map((item) => ({
        key: item.key,
        target: 'mod',
        result: '=',
        operand: item.modRevision,
      })),
      success: [...chunk.map((slot): Op => ({ type: 'delete', key: slot.key })), { type: 'put', key: base.key, value }],
    });
    // A slot written (or the base changed: clear, another fold) meanwhile: the next GC looks again.
    if (!res.succeeded) return;
    base = { ...base, value, modRevision: res.revision };
  }
}
