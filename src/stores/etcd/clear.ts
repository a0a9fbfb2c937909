/**
 * clear(): removes every message of the queue, in Txns of 120 ops, once its
 * flow children have been counted for their parents (each in a Txn of its
 * own, before: a clear cut short never leaves a parent waiting for good):
 * producer keys of every spelling, the ordered queue, deliveries (not the
 * consumers' registrations), records, kept payloads, the GC index and the
 * dry-run count. The configuration stays. The dispatcher sees the records go
 * and forgets the messages; consumers see their deliveries go and lose them.
 *
 * The first Txn deletes every record and every child's debt together, and only
 * if no child came to owe its parent since the count began: a flow written into
 * the queue meanwhile makes it fail, and the count runs again (that child
 * counted as removed), so no child is deleted uncounted.
 */
import { prefixEnd, type Compare, type Kv, type Op } from './kv.js';
import { producerPrefixes } from './dispatcher/snapshot.js';
import { resetCountOps } from './counts.js';
import { settleBeforeClear } from './flow-ends.js';
import type { QueueKeys } from './keys.js';

/** Counts and first Txns a clear tries while flows keep arriving in the queue. */
const CLEAR_TRIES = 10;
/** Operations a clear puts in one Txn (etcd takes 128 by default). */
const TXN_OPS = 120;

export async function clearQueue(kv: Kv, keys: QueueKeys): Promise<void> {
  const ops = await clearOps(kv, keys);
  for (let tries = 0; ; tries++) {
    if (tries === CLEAR_TRIES) {
      throw new Error(`kvmq: flows kept arriving in ${keys.queue} while it was cleared; try again`);
    }
    const { revision } = await kv.txn({ compare: [], success: [] });
    // Flow children not counted for their parents yet are first (flow-ends.ts): as removals, or as they ended.
    await settleBeforeClear(kv, keys);
    // Every debt left was there before the count began (one it could not count: its message is gone already).
    const noNewDebts = [keys.owesIndex, keys.unsettledIndex].map((index): Compare => ({
      key: index,
      end: prefixEnd(index),
      target: 'mod',
      result: '<',
      operand: revision + 1,
    }));
    if ((await kv.txn({ compare: noNewDebts, success: ops.slice(0, TXN_OPS) })).succeeded) break;
  }
  for (let i = TXN_OPS; i < ops.length; i += TXN_OPS) await kv.txn({ compare: [], success: ops.slice(i, i + TXN_OPS) });
}

/** The deletes of a clear: the queue's messages and debts first (one Txn), the registrations' deliveries last. */
async function clearOps(kv: Kv, keys: QueueKeys): Promise<Op[]> {
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
  return [
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
}
