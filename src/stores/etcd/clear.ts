/**
 * clear(): removes every message of the queue, in Txns of 120 ops, once its
 * flow children have been counted for their parents (each in a Txn of its
 * own, before: a clear cut short never leaves a parent waiting for good):
 * producer keys of every spelling, the ordered queue, deliveries (not the
 * consumers' registrations), records, kept payloads, the GC index and the
 * dry-run count. The configuration stays. The dispatcher sees the records go
 * and forgets the messages; consumers see their deliveries go and lose them.
 */
import { prefixEnd, type Kv, type Op } from './kv.js';
import { producerPrefixes } from './dispatcher/snapshot.js';
import { resetCountOps } from './counts.js';
import { settleBeforeClear } from './flow-ends.js';
import type { QueueKeys } from './keys.js';

export async function clearQueue(kv: Kv, keys: QueueKeys): Promise<void> {
  // Flow children not counted for their parents yet are first (flow-ends.ts): as removals, or as they ended.
  await settleBeforeClear(kv, keys);
  const consumerPrefixes = [keys.prefix, keys.shortPrefix].flatMap((base) => [`${base}consumer/`, `${base}c/`]);
  const registrations: string[] = [];
  for (const prefix of consumerPrefixes) {
    const res = await kv.range({ key: prefix, end: prefixEnd(prefix), keysOnly: true });
    for (const item of res.kvs) {
      const parsed = keys.parse(item.key);
      if (parsed.kind === 'registration') registrations.push(parsed.consumerKey);
    }
  }
  const range = (key: string, end: string): Op => ({ type: 'delete', key, end });
  // The deliveries last: what the counts count (records, ordered keys) goes with their reset, in the first Txn.
  const ops: Op[] = [
    ...producerPrefixes(keys).map((p) => range(p, prefixEnd(p))),
    range(keys.orderedStart, keys.orderedEnd),
    range(keys.records, prefixEnd(keys.records)),
    range(keys.payloads, prefixEnd(keys.payloads)),
    range(keys.reports, prefixEnd(keys.reports)),
    // The queue's events go too; the trimmed revision stays, and readers simply see the events written after.
    ...[
      keys.doneIndex,
      keys.failedIndex,
      keys.backoffIndex,
      keys.refuseIndex,
      keys.expiryIndex,
      keys.stuckIndex,
      keys.debounceIndex,
      keys.waitingIndex,
      keys.owesIndex,
      keys.stagedIndex,
      keys.unsettledIndex,
      keys.events,
    ].map((index) => range(index, prefixEnd(index))),
    { type: 'delete', key: keys.eoq },
    // The counts start again from zero; writers whose slot went fail their compare and read it again.
    ...resetCountOps(keys),
    ...registrations.map((r) => range(`${r}/0`, `${r}/:`)),
    // The rate limits start afresh (the dispatcher reads the deletes through its watch).
    { type: 'delete', key: keys.rate },
    range(keys.groupRates, prefixEnd(keys.groupRates)),
  ];
  for (let i = 0; i < ops.length; i += 120) await kv.txn({ compare: [], success: ops.slice(i, i + 120) });
}
