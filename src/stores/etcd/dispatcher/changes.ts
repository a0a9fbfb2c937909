/**
 * Every change a dispatcher makes, as the ops of one guarded Txn (see
 * docs/etcd.md, "Who writes what"). Each compares the record's mod revision
 * (the message's version) or the producer key's, so a change planned on a
 * stale view fails instead of overwriting, and brings the reads that say why.
 */
import { encodeEnvelope } from '../envelope.js';
import { encodeRecord, type MessageRecord } from '../record.js';
import {
  deadLetterCompare,
  deadLetterOps,
  delivered,
  failedRecord,
  finished,
  finishOps,
  freshRecord,
  indexOps,
  lostDelivery,
  undelivered,
} from '../transitions.js';
import type { Compare, Op, RangeOp } from '../kv.js';
import type { ChangeEvents } from '../event-ops.js';
import { countChange, DEAD_LETTERED, type CountDelta } from '../counts.js';
import { MAX_PAYLOAD_BYTES, type QueueKeys } from '../keys.js';
import type { Consumer, Msg, ProducerPut } from './model.js';

export interface Ops {
  readonly compares: Compare[];
  readonly ops: Op[];
  readonly reads: RangeOp[];
  /** The message's record once the Txn succeeded (null: the message is finished or gone). */
  readonly record: MessageRecord | null;
  /** False when the Txn leaves the record as it was (its mod revision does not move). */
  readonly writesRecord?: boolean;
  /** The error a message fails with in this change, for its `failed` event. */
  readonly failedError?: string | null;
  /** The queue events it writes (put by the batch it goes in). */
  readonly events?: ChangeEvents | undefined;
  /** What it changes in queues' counts (counts.ts). */
  readonly counts?: readonly CountDelta[];
}

const recordIs = (keys: QueueKeys, msg: Msg): Compare => ({
  key: keys.record(msg.id),
  target: 'mod',
  result: '=',
  operand: msg.rev,
});

const readRecord = (keys: QueueKeys, id: string): RangeOp => ({ type: 'range', key: keys.record(id) });

function deliveryOps(keys: QueueKeys, record: MessageRecord, id: string, c: Consumer, payload: Buffer, size: number) {
  const key = keys.delivery(c.key, record.idx ?? '', id);
  const value = c.reg.envelope ? encodeEnvelope(record, size, payload) : payload;
  return { type: 'put', key, value } as const;
}

function lockUntil(c: Consumer, now: number): number | null {
  return c.reg.lockMs === null ? null : now + c.reg.lockMs;
}

/** The record of a plain producer's put: bytes, no metadata, filters or policy (a revive keeps the history). */
function plainRecord(idx: string, now: number, history: MessageRecord['history'] = []): MessageRecord {
  const fields = {
    encoding: 'bytes',
    metadata: {},
    filterClass: '',
    source: 'plain',
    nonce: '',
    policy: null,
  } as const;
  return freshRecord({ ...fields, idx, readyAt: now, history }, now);
}

/** A change of a plain producer's put: guarded by its key's revision and `record` (the id's record), reading both. */
function producerGuard(keys: QueueKeys, put: ProducerPut, record: Compare): Pick<Ops, 'compares' | 'reads'> {
  return {
    compares: [{ key: put.key, target: 'mod', result: '=', operand: put.modRevision }, record],
    reads: [
      { type: 'range', key: put.key },
      { type: 'range', key: keys.record(put.id) },
    ],
  };
}

const noRecordYet = (keys: QueueKeys, id: string): Compare => ({
  key: keys.record(id),
  target: 'version',
  result: '=',
  operand: 0,
});

/**
 * A pending message, or one taken from another consumer (lock over, consumer gone: `lost`, the
 * record with that loss counted), handed to `c`.
 */
export function deliver(
  keys: QueueKeys,
  msg: Msg,
  c: Consumer,
  payload: Buffer,
  size: number,
  now: number,
  lost: MessageRecord | null = null,
): Ops {
  const record = delivered(lost ?? msg.record, c.key, lockUntil(c, now), now);
  const ops: Op[] = [];
  if (msg.deliveryKey !== null) ops.push({ type: 'delete', key: msg.deliveryKey });
  ops.push(deliveryOps(keys, record, msg.id, c, payload, size));
  ops.push({ type: 'put', key: keys.record(msg.id), value: encodeRecord(record) });
  ops.push(...indexOps(keys, msg.id, msg.record, record));
  return { compares: [recordIs(keys, msg)], ops, reads: [readRecord(keys, msg.id)], record };
}

/** A delivery whose consumer is gone, or whose lock ran out long ago, with nobody to take it: back to the queue. */
export function undeliver(keys: QueueKeys, msg: Msg, now: number, lost: MessageRecord): Ops {
  const record = undelivered(lost, now, false);
  const ops: Op[] = [{ type: 'put', key: keys.record(msg.id), value: encodeRecord(record) }];
  if (msg.deliveryKey !== null) ops.unshift({ type: 'delete', key: msg.deliveryKey });
  return { compares: [recordIs(keys, msg)], ops, reads: [readRecord(keys, msg.id)], record };
}

/** The holder's loss of a message, counted: the record after it (failed at `maxDeliveries`). */
export function lose(msg: Msg, maxDeliveries: number, now: number): MessageRecord {
  return lostDelivery(msg.record, maxDeliveries, now);
}

/**
 * A message lost `maxDeliveries` times: failed, its payload kept for a retry (a requeue's next payload is
 * kept already), or moved to the dead-letter queue in the same Txn.
 */
export function fail(
  keys: QueueKeys,
  msg: Msg,
  failed: MessageRecord,
  payload: Buffer,
  deadLetter: QueueKeys | null,
  now: number,
): Ops {
  const ops: Op[] = [];
  if (msg.deliveryKey !== null) ops.push({ type: 'delete', key: msg.deliveryKey });
  if (deadLetter !== null && msg.record.nextEncoding === null) {
    ops.push(...deadLetterOps(keys, deadLetter, msg.id, msg.record, failed, msg.orderedKey, payload, now));
    return {
      compares: [recordIs(keys, msg), deadLetterCompare(deadLetter, msg.id)],
      ops,
      reads: [readRecord(keys, msg.id), { type: 'range', key: deadLetter.record(msg.id) }],
      record: null,
      counts: [...countChange(keys, msg.record, null), ...countChange(deadLetter, null, DEAD_LETTERED)],
    };
  }
  ops.push({ type: 'put', key: keys.record(msg.id), value: encodeRecord(failed) });
  ops.push({ type: 'delete', key: msg.orderedKey });
  if (msg.record.nextEncoding === null) ops.push({ type: 'put', key: keys.payload(msg.id), value: payload });
  ops.push(...indexOps(keys, msg.id, msg.record, failed));
  return {
    compares: [recordIs(keys, msg)],
    ops,
    reads: [readRecord(keys, msg.id)],
    record: null,
    counts: countChange(keys, msg.record, failed),
  };
}

/**
 * A plain consumer deleted its delivery: the ack. The message is done (a
 * success), or, if a producer asked for a requeue meanwhile, queued again.
 */
export function ack(keys: QueueKeys, msg: Msg, now: number): Ops {
  const result = finished(msg.record, { outcome: 'success', backoffMs: 0, error: null, startedAt: null }, now);
  const ops = finishOps(keys, msg.id, msg.record, result, msg.orderedKey, Buffer.alloc(0), msg.nextPayload);
  return {
    compares: [recordIs(keys, msg)],
    ops,
    reads: [readRecord(keys, msg.id)],
    record: result.leavesQueue ? null : result.record,
    counts: countChange(keys, msg.record, result.record),
  };
}

/** Someone deleted a live message's ordered key: put it back (value from the watch's previous kv). */
export function restore(keys: QueueKeys, msg: Msg, value: Buffer): Ops {
  return {
    compares: [recordIs(keys, msg), { key: msg.orderedKey, target: 'version', result: '=', operand: 0 }],
    ops: [{ type: 'put', key: msg.orderedKey, value }],
    reads: [readRecord(keys, msg.id)],
    record: msg.record,
    writesRecord: false,
  };
}

/**
 * A plain producer's put moved into the ordered queue with a new record, and,
 * when a consumer has room, delivered in the same Txn.
 */
export function move(
  keys: QueueKeys,
  put: ProducerPut,
  idx: string,
  c: Consumer | null,
  size: number,
  now: number,
): Ops {
  const fresh = plainRecord(idx, now);
  const record = c === null ? fresh : delivered(fresh, c.key, lockUntil(c, now), now);
  const ops: Op[] = [
    { type: 'delete', key: put.key },
    { type: 'put', key: keys.ordered(idx, put.id), value: put.value },
    { type: 'put', key: keys.record(put.id), value: encodeRecord(record) },
  ];
  if (c !== null) ops.push(deliveryOps(keys, record, put.id, c, put.value, size));
  return {
    ...producerGuard(keys, put, noRecordYet(keys, put.id)),
    ops,
    record,
    counts: countChange(keys, null, record),
  };
}

/** A plain put whose id names a finished message past its backoff: the message runs again with the new payload. */
export function revive(
  keys: QueueKeys,
  put: ProducerPut,
  old: MessageRecord,
  recordRev: number,
  idx: string,
  now: number,
): Ops {
  const record = plainRecord(idx, now, old.history);
  return {
    ...producerGuard(keys, put, { key: keys.record(put.id), target: 'mod', result: '=', operand: recordRev }),
    ops: [
      { type: 'delete', key: put.key },
      { type: 'put', key: keys.ordered(idx, put.id), value: put.value },
      { type: 'put', key: keys.record(put.id), value: encodeRecord(record) },
      { type: 'delete', key: keys.payload(put.id) },
      ...indexOps(keys, put.id, old, record),
    ],
    record,
    counts: countChange(keys, old, record),
  };
}

/**
 * A plain put kvmq cannot take (over its payload limit): the message fails with the reason, visible in
 * status, list and counts, and its payload stays readable where it is (the record points at it) until it
 * is removed or collected with the message.
 */
export function refuseTooLarge(keys: QueueKeys, put: ProducerPut, now: number): Ops {
  const fresh = plainRecord('', now);
  const error =
    `payload of ${put.value.length} bytes is over kvmq's limit of ${MAX_PAYLOAD_BYTES} bytes; ` +
    `it stays at ${put.key}`;
  const record: MessageRecord = { ...failedRecord(fresh, error, now), payloadKey: put.key };
  return {
    ...producerGuard(keys, put, noRecordYet(keys, put.id)),
    ops: [
      { type: 'put', key: keys.record(put.id), value: encodeRecord(record) },
      ...indexOps(keys, put.id, null, record),
    ],
    record: null,
    failedError: error,
    counts: countChange(keys, null, record),
  };
}

/** A plain put whose id names a live message: refused as a duplicate (the key is removed). */
export function refuse(put: ProducerPut): Ops {
  return {
    compares: [{ key: put.key, target: 'mod', result: '=', operand: put.modRevision }],
    ops: [{ type: 'delete', key: put.key }],
    reads: [{ type: 'range', key: put.key }],
    record: null,
  };
}

/** Tells a kvmq consumer its request `ask` has been served (on the consumer's own lease). */
/** `wakeAt`: the queue's rate limit holds ready messages back until then. */
export function answer(keys: QueueKeys, c: Consumer, size: number, wakeAt: number | null = null): Ops {
  const body = wakeAt === null ? { ask: c.reg.ask, queueSize: size } : { ask: c.reg.ask, queueSize: size, wakeAt };
  const value = Buffer.from(JSON.stringify(body), 'utf8');
  return {
    compares: [],
    ops: [{ type: 'put', key: keys.answer(c.key), value, lease: c.lease }],
    reads: [],
    record: null,
  };
}
