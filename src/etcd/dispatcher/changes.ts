/**
 * Every change a dispatcher makes, as the ops of one guarded Txn (see
 * docs/etcd.md, "Who writes what"). Each compares the record's mod revision
 * (the message's version) or the producer key's, so a change planned on a
 * stale view fails instead of overwriting, and brings the reads that say why.
 */
import { encodeEnvelope } from '../envelope.js';
import { encodeRecord, type MessageRecord } from '../record.js';
import { delivered, finished, freshRecord, undelivered } from '../transitions.js';
import type { Compare, Op, RangeOp } from '../kv.js';
import type { QueueKeys } from '../keys.js';
import type { Consumer, Msg, ProducerPut } from './model.js';

export interface Ops {
  readonly compares: Compare[];
  readonly ops: Op[];
  readonly reads: RangeOp[];
  /** The message's record once the Txn succeeded (null: the message is finished or gone). */
  readonly record: MessageRecord | null;
  /** False when the Txn leaves the record as it was (its mod revision does not move). */
  readonly writesRecord?: boolean;
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

/** A pending message, or one taken from another consumer (lock over, consumer gone), handed to `c`. */
export function deliver(keys: QueueKeys, msg: Msg, c: Consumer, payload: Buffer, size: number, now: number): Ops {
  const record = delivered(msg.record, c.key, lockUntil(c, now), now);
  const ops: Op[] = [];
  if (msg.deliveryKey !== null) ops.push({ type: 'delete', key: msg.deliveryKey });
  ops.push(deliveryOps(keys, record, msg.id, c, payload, size));
  ops.push({ type: 'put', key: keys.record(msg.id), value: encodeRecord(record) });
  return { compares: [recordIs(keys, msg)], ops, reads: [readRecord(keys, msg.id)], record };
}

/** A delivery whose consumer is gone, with nobody to take it: back to the queue. */
export function undeliver(keys: QueueKeys, msg: Msg, now: number): Ops {
  const record = undelivered(msg.record, now, false);
  const ops: Op[] = [{ type: 'put', key: keys.record(msg.id), value: encodeRecord(record) }];
  if (msg.deliveryKey !== null) ops.unshift({ type: 'delete', key: msg.deliveryKey });
  return { compares: [recordIs(keys, msg)], ops, reads: [readRecord(keys, msg.id)], record };
}

/**
 * A plain consumer deleted its delivery: the ack. The message is done (a
 * success), or, if a producer asked for a requeue meanwhile, queued again.
 */
export function ack(keys: QueueKeys, msg: Msg, now: number): Ops {
  const result = finished(msg.record, { outcome: 'success', backoffMs: 0, error: null }, now);
  const ops: Op[] = [{ type: 'put', key: keys.record(msg.id), value: encodeRecord(result.record) }];
  if (result.leavesQueue) {
    ops.push({ type: 'delete', key: msg.orderedKey });
    ops.push({ type: 'put', key: keys.done(now, msg.id), value: Buffer.alloc(0) });
  } else if (result.usesNextPayload && msg.nextPayload !== null) {
    ops.push({ type: 'put', key: msg.orderedKey, value: msg.nextPayload });
    ops.push({ type: 'delete', key: keys.payload(msg.id) });
  }
  return {
    compares: [recordIs(keys, msg)],
    ops,
    reads: [readRecord(keys, msg.id)],
    record: result.leavesQueue ? null : result.record,
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
  const fresh = freshRecord(
    { idx, encoding: 'bytes', metadata: {}, filterClass: '', readyAt: now, source: 'plain', nonce: '' },
    now,
  );
  const record = c === null ? fresh : delivered(fresh, c.key, lockUntil(c, now), now);
  const ops: Op[] = [
    { type: 'delete', key: put.key },
    { type: 'put', key: keys.ordered(idx, put.id), value: put.value },
    { type: 'put', key: keys.record(put.id), value: encodeRecord(record) },
  ];
  if (c !== null) ops.push(deliveryOps(keys, record, put.id, c, put.value, size));
  return {
    compares: [
      { key: put.key, target: 'mod', result: '=', operand: put.modRevision },
      { key: keys.record(put.id), target: 'version', result: '=', operand: 0 },
    ],
    ops,
    reads: [
      { type: 'range', key: put.key },
      { type: 'range', key: keys.record(put.id) },
    ],
    record,
  };
}

/** A plain put whose id names a finished message past its backoff: the message runs again with the new payload. */
export function revive(keys: QueueKeys, put: ProducerPut, recordRev: number, idx: string, now: number): Ops {
  const record = freshRecord(
    { idx, encoding: 'bytes', metadata: {}, filterClass: '', readyAt: now, source: 'plain', nonce: '' },
    now,
  );
  return {
    compares: [
      { key: put.key, target: 'mod', result: '=', operand: put.modRevision },
      { key: keys.record(put.id), target: 'mod', result: '=', operand: recordRev },
    ],
    ops: [
      { type: 'delete', key: put.key },
      { type: 'put', key: keys.ordered(idx, put.id), value: put.value },
      { type: 'put', key: keys.record(put.id), value: encodeRecord(record) },
      { type: 'delete', key: keys.payload(put.id) },
    ],
    reads: [
      { type: 'range', key: put.key },
      { type: 'range', key: keys.record(put.id) },
    ],
    record,
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
export function answer(keys: QueueKeys, c: Consumer, size: number): Ops {
  const value = Buffer.from(JSON.stringify({ ask: c.reg.ask, queueSize: size }), 'utf8');
  return {
    compares: [],
    ops: [{ type: 'put', key: keys.answer(c.key), value, lease: c.lease }],
    reads: [],
    record: null,
  };
}
