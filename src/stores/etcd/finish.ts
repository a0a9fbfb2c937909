/**
 * A kvmq consumer's writes on what it holds, each one Txn per batch guarded
 * by the records' mod revisions: finish (delete the delivery — the ack — and
 * record the outcome), extend (move the lock's end), and release (give back
 * deliveries it never started, when it stops). A record that changed is read
 * again: still ours, the write is retried; taken by another consumer (lock
 * expired, consumer gone) or cleared, the message is `lost`.
 */
import { decodeRecord, encodeRecord, owedParent, type MessageRecord } from './record.js';
import { deadLetterCompare, deadLetterOps, extended, finished, finishOps, undelivered } from './transitions.js';
import { getMany, pack, runBatch, type Change, type ChangeResult } from './txn-batch.js';
import { laneOf } from './txn-lane.js';
import { childEndOf, settled } from './flow-ends.js';
import { countEnds, type Counted, type OwedEnd } from './flow-tally.js';
import { sleep } from '../../model/time.js';
import { changeEvents, type ChangeEvents, type EventNote } from './event-ops.js';
import { countChange, DEAD_LETTERED, type CountDelta } from './counts.js';
import type { Delivery, LocalConsumer } from './consumer.js';
import type { Compare, Kv, Op, RangeOp } from './kv.js';
import type { QueueKeys } from './keys.js';
import { finishEventText } from '../contract/finish-event-text.js';
import type { Finish, FinishResult, HeldAttempt } from '../contract/contract.js';

const MAX_TRIES = 10;
const FLOW_TRIES = 100;
const NO_PAYLOADS: ReadonlyMap<string, Buffer> = new Map();
// The rest of a burst of finishes that filled a Txn waits this long for the next burst (txn-lane.ts).
const FINISH_HOLD_MS = 50;

interface Write extends Change {
  readonly delivery: Delivery;
  /** The record written, for the delivery kept (extend) or null when the delivery goes. */
  readonly next: MessageRecord | null;
  /** Moves the message to this dead-letter queue (its record there must not exist). */
  readonly deadLetter: QueueKeys | null;
  /** What its end counts for its flow's parent, in the same Txn (flow-tally.ts). */
  readonly owed: OwedEnd | null;
}

/** Every builder returns all fields (one object shape: `guarded` stays optimised for all its callers). */
export interface Built {
  ops: Op[];
  next: MessageRecord | null;
  deadLetter: QueueKeys | null;
  events: ChangeEvents | undefined;
  counts: CountDelta[] | undefined;
  /** What the message's end counts for its flow's parent (flow-tally.ts). */
  owed: OwedEnd | null;
}

/**
 * Runs writes built from each delivery's current record until each succeeded
 * or its message is no longer this consumer's. Returns the deliveries lost.
 */
export async function guarded(
  kv: Kv,
  keys: QueueKeys,
  consumer: LocalConsumer,
  deliveries: readonly Delivery[],
  build: (d: Delivery, payloads: ReadonlyMap<string, Buffer>) => Built,
  needsPayload: (d: Delivery) => boolean,
  run: (writes: readonly Write[]) => Promise<ChangeResult[]> = (writes) => runPacked(kv, writes),
): Promise<Set<Delivery>> {
  const lost = new Set<Delivery>();
  let todo = deliveries;
  // Whether the last try's writes counted for a flow's parent (flow-tally.ts).
  let counting = false;
  for (let tries = 0; todo.length > 0; tries++) {
    // Siblings of a flow ending in other processes contend on their parent's record: more tries, spread apart.
    if (tries >= (counting ? FLOW_TRIES : MAX_TRIES)) {
      throw new Error(`kvmq: writes to ${keys.queue} kept conflicting; try again`);
    }
    if (counting && tries > 0) await sleep(Math.random() * Math.min(100, 5 * tries));
    // Most finishes need no payload read: then no arrays or map for it (a worker finishes one call per message).
    let payloads: ReadonlyMap<string, Buffer> = NO_PAYLOADS;
    if (todo.some(needsPayload)) {
      const wanting = todo.filter(needsPayload);
      const kvs = await getMany(
        kv,
        wanting.map((d) => keys.payload(d.id)),
      );
      const read = new Map<string, Buffer>();
      wanting.forEach((d, i) => read.set(d.id, kvs[i]?.value ?? Buffer.alloc(0)));
      payloads = read;
    }
    const writes: Write[] = todo.map((delivery) => {
      const { ops, next, deadLetter, events, counts, owed } = build(delivery, payloads);
      // Each compare with the read that tells whether it still holds, at the same place (flow-tally.ts reads so).
      const compares: Compare[] = [
        { key: keys.record(delivery.id), target: 'mod', result: '=', operand: delivery.rev },
      ];
      const reads: RangeOp[] = [{ type: 'range', key: keys.record(delivery.id) }];
      if (deadLetter !== null) {
        compares.push(deadLetterCompare(deadLetter, delivery.id));
        reads.push({ type: 'range', key: deadLetter.record(delivery.id) });
      }
      return { delivery, next, deadLetter, owed, compares, ops, reads, events, counts };
    });
    const again: Delivery[] = [];
    counting = writes.some((w) => w.owed !== null);
    const results = await run(writes);
    writes.forEach((write, i) => {
      const result = results[i];
      if (result === undefined) return;
      const d = write.delivery;
      if (result.ok) {
        if (write.next === null) {
          consumer.removed(d.key, result.revision);
          consumer.freed(result.revision);
        } else {
          d.record = write.next;
          d.rev = result.revision;
        }
        return;
      }
      // The id exists in the dead-letter queue: the message stays failed here instead.
      if (write.deadLetter !== null && result.reads[1]?.kvs[0] !== undefined) consumer.noDeadLetter.add(d.id);
      const kvRecord = result.reads[0]?.kvs[0];
      const record = kvRecord === undefined ? null : decodeRecord(kvRecord.value);
      if (
        kvRecord === undefined ||
        record?.phase !== 'locked' ||
        record.consumer !== consumer.key ||
        record.attempt !== d.record.attempt
      ) {
        lost.add(d);
        // The record changed at its mod revision; a delivery to this consumer made then (the message handed to it
        // again, under the same key) is a new one, and stays.
        consumer.removed(d.key, kvRecord === undefined ? result.revision : kvRecord.modRevision - 1);
        return;
      }
      if (kvRecord.modRevision !== d.rev) {
        d.record = record;
        d.rev = kvRecord.modRevision;
      }
      again.push(d);
    });
    todo = again;
  }
  return lost;
}

/** Runs the writes whose ends count for a flow's parent with their siblings' (flow-tally.ts), the rest by `run`. */
async function withCounts(
  kv: Kv,
  root: string,
  writes: readonly Write[],
  run: (writes: readonly Write[]) => Promise<ChangeResult[]>,
): Promise<ChangeResult[]> {
  // Most finishes are of messages in no flow: one call, as without flows.
  if (!writes.some((w) => w.owed !== null)) return run(writes);
  const counted = writes.filter((w): w is Write & Counted => w.owed !== null);
  const plain = writes.filter((w) => w.owed === null);
  const [countedResults, plainResults] = await Promise.all([countEnds(kv, root, counted), run(plain)]);
  const answers = new Map<Write, ChangeResult | undefined>();
  counted.forEach((w, i) => answers.set(w, countedResults[i]));
  plain.forEach((w, i) => answers.set(w, plainResults[i]));
  return writes.map((w) => answers.get(w) as ChangeResult);
}

/** The writes in as few Txns as they fit, all sent at once. */
async function runPacked(kv: Kv, writes: readonly Write[]): Promise<ChangeResult[]> {
  const batches = pack(writes);
  const answers = await Promise.all(batches.map((batch) => runBatch(kv, batch)));
  return answers.flatMap((a) => a.results);
}

export async function finishDeliveries(
  kv: Kv,
  keys: QueueKeys,
  consumer: LocalConsumer,
  finishes: readonly Finish[],
  deadLetter: QueueKeys | null,
  events: boolean,
): Promise<FinishResult[]> {
  const held = new Map<string, { delivery: Delivery; finish: Finish }>();
  for (const f of finishes) {
    const delivery = consumer.byId(f.id);
    if (delivery?.claimed === true && delivery.record.attempt === f.attempt && !held.has(f.id)) {
      held.set(f.id, { delivery, finish: f });
    }
  }
  for (const h of held.values()) h.delivery.leaving = true;
  // Handlers' reports move with a message to the dead-letter queue: read for the failures only (a rare path).
  const failing = deadLetter === null ? [] : [...held.values()].filter((h) => h.finish.outcome === 'error');
  const reports = new Map<string, Buffer>();
  if (failing.length > 0) {
    const kvs = await getMany(
      kv,
      failing.map((h) => keys.report(h.delivery.id)),
    );
    failing.forEach((h, i) => kvs[i] != null && reports.set(h.delivery.id, (kvs[i] as { value: Buffer }).value));
  }
  const build = (d: Delivery, payloads: ReadonlyMap<string, Buffer>): Built => {
    const f = held.get(d.id)?.finish;
    if (f === undefined) throw new Error('kvmq: a finish lost track of its message');
    const now = Date.now();
    const ran = finished(d.record, f, now);
    const owed = owedEnd(keys, d, ran.record);
    const result = owed === null ? ran : { ...ran, record: settled(ran.record) };
    const ordered = keys.ordered(d.idx, d.id);
    const event = finishEvent(d.id, d.record.attempt, f);
    const noted = event === null ? undefined : changeEvents(keys, events, event);
    if (result.record.phase === 'failed' && deadLetter !== null && !consumer.noDeadLetter.has(d.id)) {
      const ops = deadLetterOps(keys, deadLetter, d.id, d.record, result.record, ordered, d.payload, now);
      const report = reports.get(d.id);
      if (report !== undefined) ops.push({ type: 'put', key: deadLetter.report(d.id), value: report });
      const counts = [...countChange(keys, d.record, null), ...countChange(deadLetter, null, DEAD_LETTERED)];
      return { ops: [{ type: 'delete', key: d.key }, ...ops], next: null, deadLetter, events: noted, counts, owed };
    }
    const next = result.usesNextPayload ? (payloads.get(d.id) ?? d.payload) : null;
    const ops = finishOps(keys, d.id, d.record, result, ordered, d.payload, next);
    const counts = countChange(keys, d.record, result.record);
    return { ops: [{ type: 'delete', key: d.key }, ...ops], next: null, deadLetter: null, events: noted, counts, owed };
  };
  const lost = await guarded(
    kv,
    keys,
    consumer,
    [...held.values()].map((h) => h.delivery),
    build,
    (d) => d.record.nextEncoding !== null,
    // The queue's lane: the finishes of concurrent calls share Txns (txn-lane.ts); a flow's siblings, their parent's.
    (writes) =>
      withCounts(kv, keys.root, writes, (plain) => laneOf(kv, `finish ${keys.prefix}`, FINISH_HOLD_MS).run(plain)),
  );
  for (const d of held.values()) consumer.noDeadLetter.delete(d.delivery.id);
  const lostIds = lost.size === 0 ? null : new Set([...lost].map((d) => d.id));
  return finishes.map((f) => (held.get(f.id)?.finish === f && lostIds?.has(f.id) !== true ? 'ok' : 'lost'));
}

/** What a message's end counts for its flow's parent; null when it owes none or has not ended. */
function owedEnd(keys: QueueKeys, d: Delivery, after: MessageRecord): OwedEnd | null {
  const parent = owedParent(d.record.flow);
  const end = childEndOf(after);
  if (parent === undefined || end === undefined) return null;
  return { link: [keys.queue, d.id], flow: { ...d.record.flow, parent }, end };
}

/** The event a finish writes: by its outcome; none for a message given back unrun. */
function finishEvent(id: string, attempt: number, f: Finish): EventNote | null {
  switch (f.outcome) {
    case 'success': {
      const text = finishEventText(f);
      return text === null ? { type: 'completed', id, attempt } : { type: 'completed', id, attempt, error: text };
    }
    case 'error':
      return { type: 'failed', id, attempt, error: f.error };
    case 'retry':
      return f.startedAt === null ? null : { type: 'retrying', id, attempt, error: f.error };
  }
}

/** Extends the locks of held messages; returns the ids no longer held. */
export async function extendDeliveries(
  kv: Kv,
  keys: QueueKeys,
  consumer: LocalConsumer,
  held: readonly HeldAttempt[],
  lockMs: number,
): Promise<string[]> {
  const mine: Delivery[] = [];
  const gone: string[] = [];
  for (const h of held) {
    const delivery = consumer.byId(h.id);
    if (delivery?.claimed === true && delivery.record.attempt === h.attempt) mine.push(delivery);
    else gone.push(h.id);
  }
  const lost = await guarded(
    kv,
    keys,
    consumer,
    mine,
    (d) => {
      const next = extended(d.record, Date.now() + lockMs);
      const ops: Op[] = [{ type: 'put', key: keys.record(d.id), value: encodeRecord(next) }];
      return { ops, next, deadLetter: null, events: undefined, counts: undefined, owed: null };
    },
    () => false,
  );
  return [...gone, ...[...lost].map((d) => d.id)];
}

/** Gives back deliveries the consumer never handed to a handler: queued again, their attempt undone. */
export async function releaseDeliveries(
  kv: Kv,
  keys: QueueKeys,
  consumer: LocalConsumer,
  deliveries: readonly Delivery[],
): Promise<void> {
  for (const d of deliveries) d.leaving = true;
  await guarded(
    kv,
    keys,
    consumer,
    deliveries,
    (d) => ({
      ops: [
        { type: 'delete', key: d.key },
        { type: 'put', key: keys.record(d.id), value: encodeRecord(undelivered(d.record, Date.now(), true)) },
      ],
      next: null,
      deadLetter: null,
      events: undefined,
      counts: undefined,
      owed: null,
    }),
    () => false,
  );
}
