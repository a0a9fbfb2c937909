/**
 * Packs independent guarded changes into as few Txns as etcd accepts: at
 * most 128 compares, 128 success ops and 128 failure ops each
 * (--max-txn-ops), and well under 1.5 MiB (--max-request-bytes). Each change
 * brings its compares, its writes and the reads that tell, when the Txn
 * fails, what changed under it. A Txn is all or nothing, so a failed one is
 * sent again without the changes that no longer hold.
 */
import { eventOps, type ChangeEvents, type EventNote } from './event-ops.js';
import { countTxn } from './counter-slots.js';
import type { CountDelta } from './counts.js';
import type { Compare, KeyValue, Kv, Op, RangeOp, RangeResult, TxnResult } from './kv.js';

export const MAX_TXN_OPS = 128;
export const MAX_TXN_BYTES = 1_400_000;

export interface Change {
  readonly compares: readonly Compare[];
  readonly ops: readonly Op[];
  /** Read when the Txn fails, to learn what no longer holds. */
  readonly reads: readonly RangeOp[];
  /** Queue events it writes: the batch puts those of all its changes as one key per queue. */
  readonly events?: ChangeEvents | undefined;
  /** What it changes in queues' counts: the batch puts one slot per queue with the sum (counter-slots.ts). */
  readonly counts?: readonly CountDelta[] | undefined;
}

export type ChangeResult =
  | { readonly ok: true; readonly revision: number }
  | { readonly ok: false; readonly revision: number; readonly reads: readonly RangeResult[] };

// A batch's event key, and each event in it, as sized for packing.
const EVENT_KEY_BYTES = 200;
const EVENT_BYTES = 80;
// A count slot's compare, put and read.
const SLOT_BYTES = 240;

function size(change: Change): number {
  let bytes = 64;
  // An event's text (an error, cut; a result, whole) on top of its fields.
  for (const note of change.events?.notes ?? []) bytes += EVENT_BYTES + 2 * (note.error?.length ?? 0);
  for (const c of change.compares) bytes += c.key.length + 24;
  for (const op of change.ops) bytes += op.key.length + 24 + (op.type === 'put' ? op.value.length : 0);
  for (const r of change.reads) bytes += r.key.length + 24;
  return bytes;
}

/** What a Txn holds, counted against etcd's limits. */
interface TxnSize {
  compares: number;
  ops: number;
  reads: number;
  bytes: number;
}

function within(t: TxnSize): boolean {
  return t.compares <= MAX_TXN_OPS && t.ops <= MAX_TXN_OPS && t.reads <= MAX_TXN_OPS && t.bytes <= MAX_TXN_BYTES;
}

/**
 * What a change adds to a batch: its own compares, writes and reads, the batch's event key if it is the first with
 * events (`eventKey`: the batch has one already), and a count slot for each of `slots` (newSlots).
 */
function added(change: Change, eventKey: boolean, slots: readonly string[]): TxnSize {
  const opensEventKey = change.events !== undefined && !eventKey;
  return {
    compares: change.compares.length + slots.length,
    ops: change.ops.length + (opensEventKey ? 1 : 0) + slots.length,
    reads: change.reads.length + slots.length,
    bytes: size(change) + (opensEventKey ? EVENT_KEY_BYTES : 0) + slots.length * SLOT_BYTES,
  };
}

/** Groups changes into Txn-sized batches, keeping `fixed` (a fence compare and its read) in each. */
export function pack<T extends Change>(
  changes: readonly T[],
  fixed: Change = { compares: [], ops: [], reads: [] },
): T[][] {
  const batches: T[][] = [];
  const empty = (): TxnSize => ({
    compares: fixed.compares.length,
    ops: fixed.ops.length,
    reads: fixed.reads.length,
    bytes: size(fixed),
  });
  let batch: T[] = [];
  let total = empty();
  let eventKey = false;
  let counted = new Set<string>();
  for (const change of changes) {
    let slots = newSlots(change, counted);
    let more = added(change, eventKey, slots);
    const fits = within({
      compares: total.compares + more.compares,
      ops: total.ops + more.ops,
      reads: total.reads + more.reads,
      bytes: total.bytes + more.bytes,
    });
    if (!fits && batch.length > 0) {
      batches.push(batch);
      batch = [];
      total = empty();
      eventKey = false;
      counted = new Set<string>();
      slots = newSlots(change, counted);
      more = added(change, eventKey, slots);
    }
    batch.push(change);
    eventKey ||= change.events !== undefined;
    for (const prefix of slots) counted.add(prefix);
    total.compares += more.compares;
    total.ops += more.ops;
    total.reads += more.reads;
    total.bytes += more.bytes;
  }
  if (batch.length > 0) batches.push(batch);
  return batches;
}

/** Whether one change, with its event key and a count slot per queue it counts in, is a Txn etcd takes. */
export function fitsOneTxn(change: Change): boolean {
  return within(added(change, false, newSlots(change, new Set())));
}

const NO_SLOTS: readonly string[] = [];

/** The queues whose counts the change touches that the batch has no slot for yet. */
function newSlots(change: Change, counted: ReadonlySet<string>): readonly string[] {
  const counts = change.counts;
  // Most changes count in one queue the batch already has a slot for: nothing to allocate.
  if (counts === undefined || counts.length === 0) return NO_SLOTS;
  if (counts.length === 1) {
    const prefix = (counts[0] as CountDelta).keys.prefix;
    return counted.has(prefix) ? NO_SLOTS : [prefix];
  }
  const prefixes = new Set<string>();
  for (const c of counts) if (!counted.has(c.keys.prefix)) prefixes.add(c.keys.prefix);
  return [...prefixes];
}

/**
 * Runs one batch as one Txn. On success every change succeeded; on failure
 * none did, and each gets its own reads back (after the fixed ones).
 */
export async function runBatch(
  kv: Kv,
  batch: readonly Change[],
  fixed: Change = { compares: [], ops: [], reads: [] },
): Promise<{ results: ChangeResult[]; fixedReads: readonly RangeResult[] }> {
  // Loops, not flatMap and spreads: a Txn carries up to 128 ops, and this runs for every Txn.
  const deltas: CountDelta[] = [];
  // A compare several changes share (the same object) is sent once: etcd evaluates each, so a range costs.
  const shared = new Set<Compare>();
  const compare: Compare[] = [];
  const success: Op[] = [...fixed.ops];
  const failure: RangeOp[] = [...fixed.reads];
  const addCompare = (c: Compare): void => {
    if (shared.has(c)) return;
    shared.add(c);
    compare.push(c);
  };
  fixed.compares.forEach(addCompare);
  for (const change of batch) {
    change.compares.forEach(addCompare);
    for (const op of change.ops) success.push(op);
    for (const read of change.reads) failure.push(read);
    if (change.counts !== undefined) for (const d of change.counts) deltas.push(d);
  }
  for (const op of batchEvents(batch)) success.push(op);
  const counted = countTxn(kv, deltas);
  counted.compares.forEach(addCompare);
  for (const op of counted.ops) success.push(op);
  for (const read of counted.reads) failure.push(read);
  let res: TxnResult;
  try {
    res = await kv.txn({ compare, success, failure });
  } catch (error) {
    counted.settle(null);
    throw error;
  }
  if (res.succeeded) {
    counted.settle({ succeeded: true, revision: res.revision });
    // One answer for all: every change of the Txn succeeded at its revision (answers are read, never changed).
    const ok: ChangeResult = { ok: true, revision: res.revision };
    return { results: batch.map(() => ok), fixedReads: [] };
  }
  const reads = res.responses.filter((r): r is RangeResult => r.type === 'range');
  counted.settle({ succeeded: false, reads: reads.slice(reads.length - counted.reads.length) });
  let at = fixed.reads.length;
  const results: ChangeResult[] = batch.map((change) => {
    const mine = reads.slice(at, at + change.reads.length);
    at += change.reads.length;
    return { ok: false, revision: res.revision, reads: mine };
  });
  return { results, fixedReads: reads.slice(0, fixed.reads.length) };
}

/** The puts of a batch's events: one key per queue (a batch is of one queue but for dead-letter moves). */
function batchEvents(batch: readonly Change[]): Op[] {
  const byQueue = new Map<string, { keys: ChangeEvents['keys']; notes: EventNote[] }>();
  for (const change of batch) {
    if (change.events === undefined) continue;
    const entry = byQueue.get(change.events.keys.events);
    if (entry === undefined)
      byQueue.set(change.events.keys.events, { keys: change.events.keys, notes: [...change.events.notes] });
    else entry.notes.push(...change.events.notes);
  }
  const now = Date.now();
  return [...byQueue.values()].flatMap(({ keys, notes }) => eventOps(keys, true, now, ...notes));
}

/** Reads many single keys in as few Txns as allowed; results align with `keys` (null: absent). */
export async function getMany(kv: Kv, keys: readonly string[], revision?: number): Promise<(KeyValue | null)[]> {
  const chunks: string[][] = [];
  for (let i = 0; i < keys.length; i += MAX_TXN_OPS) chunks.push(keys.slice(i, i + MAX_TXN_OPS));
  const answers = await Promise.all(
    chunks.map((chunk) =>
      kv.txn({
        compare: [],
        success: chunk.map((key): Op => ({ type: 'range', key, ...(revision === undefined ? {} : { revision }) })),
      }),
    ),
  );
  return answers.flatMap((res) => res.responses.map((r) => (r.type === 'range' ? (r.kvs[0] ?? null) : null)));
}
