/**
 * The writer's side of the counts (counts.ts): each Txn that changes a queue's counts puts, in the same Txn,
 * the new running totals of one of this process's slot keys for that queue, and compares that slot's mod
 * revision (absent: version 0). A slot serves one Txn at a time, so no two Txns in flight add to the same
 * totals; a process has as many slots per queue as it had Txns in flight at once.
 *
 * Why this is exact: a Txn that fails its compares writes nothing, counts included. A slot changed under its
 * writer (deleted by clear or folded into the base by GC, or written by a Txn whose answer never came back)
 * fails the compare; the failure read gives the slot's true totals and the caller tries again, as for any
 * changed record. A single counter key would make every writer of the queue compare the same key.
 */
import { randomBytes } from 'node:crypto';
import { addCounts, countSlotsPrefix, decodeCounts, encodeCounts, isZero, ZERO, type CountDelta } from './counts.js';
import type { Counts } from './counts.js';
import type { Compare, Kv, Op, RangeOp, RangeResult } from './kv.js';

/** This process's part of slot keys. */
const WRITER = randomBytes(6).toString('base64url');
// Slots made by this process, over all connections and queues: no two share a key.
let made = 0;

interface Slot {
  readonly key: string;
  totals: Counts;
  /** Its mod revision as last known; 0: absent. */
  rev: number;
}

interface Pool {
  readonly free: Slot[];
}

// Per connection and queue: a slot's revision means something only on the etcd it was read from.
const pools = new WeakMap<Kv, Map<string, Pool>>();

function poolOf(kv: Kv, prefix: string): Pool {
  let byQueue = pools.get(kv);
  if (byQueue === undefined) {
    byQueue = new Map();
    pools.set(kv, byQueue);
  }
  let pool = byQueue.get(prefix);
  if (pool === undefined) {
    pool = { free: [] };
    byQueue.set(prefix, pool);
  }
  return pool;
}

/** The outcome of the Txn: null when it is unknown (an error: it may or may not have been applied). */
export type CountOutcome =
  | { readonly succeeded: true; readonly revision: number }
  | { readonly succeeded: false; readonly reads: readonly RangeResult[] }
  | null;

export interface CountedTxn {
  readonly compares: readonly Compare[];
  readonly ops: readonly Op[];
  /** Read when the Txn fails; their answers come last among the failure reads. */
  readonly reads: readonly RangeOp[];
  /** Must be called once the Txn is answered (or failed to be): frees the slots. */
  settle(outcome: CountOutcome): void;
}

/** Takes a slot per queue whose counts the deltas change, and the compares, put and read of each. */
export function countTxn(kv: Kv, deltas: readonly CountDelta[]): CountedTxn {
  const byQueue = new Map<string, { prefix: string; delta: Counts; slotsPrefix: string }>();
  for (const d of deltas) {
    const entry = byQueue.get(d.keys.prefix);
    if (entry === undefined)
      byQueue.set(d.keys.prefix, { prefix: d.keys.prefix, delta: d.delta, slotsPrefix: countSlotsPrefix(d.keys) });
    else entry.delta = addCounts(entry.delta, d.delta);
  }
  const taken: { pool: Pool; slot: Slot; next: Counts }[] = [];
  const now = Date.now();
  for (const { prefix, delta, slotsPrefix } of byQueue.values()) {
    if (isZero(delta)) continue;
    const pool = poolOf(kv, prefix);
    const slot = pool.free.pop() ?? {
      key: `${slotsPrefix}${WRITER}.${(made++).toString(36)}`,
      totals: ZERO,
      rev: 0,
    };
    taken.push({ pool, slot, next: addCounts(slot.totals, delta) });
  }
  let settled = false;
  return {
    compares: taken.map(({ slot }) =>
      slot.rev === 0
        ? { key: slot.key, target: 'version', result: '=', operand: 0 }
        : { key: slot.key, target: 'mod', result: '=', operand: slot.rev },
    ),
    ops: taken.map(({ slot, next }) => ({ type: 'put', key: slot.key, value: encodeCounts(next, now) })),
    reads: taken.map(({ slot }) => ({ type: 'range', key: slot.key })),
    settle(outcome) {
      if (settled) return;
      settled = true;
      taken.forEach(({ pool, slot, next }, i) => {
        if (outcome?.succeeded === true) {
          slot.totals = next;
          slot.rev = outcome.revision;
        } else if (outcome !== null) {
          const item = outcome.reads[i]?.kvs[0];
          slot.totals = item === undefined ? ZERO : decodeCounts(item.value).counts;
          slot.rev = item?.modRevision ?? 0;
        }
        // Unknown outcome: the slot keeps what it knew; if the Txn was applied, the next compare fails and reads it.
        pool.free.push(slot);
      });
    },
  };
}
