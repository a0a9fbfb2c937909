/**
 * What a kvmq consumer finds in a delivery key: one JSON line (the message's
 * record at delivery and the queue's size then) and the payload's bytes.
 * Plain consumers, which did not ask for envelopes, get the payload alone.
 */
import { decodeRecord, encodeRecord, type MessageRecord } from './record.js';

const NEWLINE = 0x0a;

export interface Envelope {
  readonly record: MessageRecord;
  /** Messages waiting or held when the dispatcher delivered this one. */
  readonly queueSize: number;
  readonly payload: Buffer;
}

export function encodeEnvelope(record: MessageRecord, queueSize: number, payload: Buffer): Buffer {
  const head = Buffer.from(`${queueSize} `, 'utf8');
  return Buffer.concat([head, encodeRecord(record), Buffer.from([NEWLINE]), payload]);
}

export function decodeEnvelope(value: Buffer): Envelope | null {
  const space = value.indexOf(0x20);
  const newline = value.indexOf(NEWLINE);
  if (space <= 0 || newline < space) return null;
  const queueSize = Number(value.subarray(0, space).toString('latin1'));
  const record = decodeRecord(value.subarray(space + 1, newline));
  if (record === null || !Number.isInteger(queueSize)) return null;
  return { record, queueSize, payload: value.subarray(newline + 1) };
}
