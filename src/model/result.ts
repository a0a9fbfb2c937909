/**
 * A handler's result: what `{ status: 'success', result }` returns, stored with the success in the same atomic
 * write and read back by status, inspect, list and waitFor. Encoded as payloads are (bytes stay bytes, anything
 * else is JSON) and bounded by RESULT_MAX_BYTES on every store, so a finish stays one small write.
 */
import type { EncodedPayload } from './payload.js';

/** The largest result a handler may return, encoded, in bytes (64 KiB) on every store. */
export const RESULT_MAX_BYTES = 64 * 1024;

/** The encoded result, or a message that says why it cannot be stored (the attempt then ends in `error`). */
export function encodeResult(result: unknown): EncodedPayload | string {
  if (result instanceof Uint8Array) return bounded({ bytes: result, encoding: 'bytes' });
  // JSON.stringify's type says string; a function, a symbol or undefined give undefined.
  let text: unknown;
  try {
    text = JSON.stringify(result);
  } catch (error) {
    return `handler's result is not JSON-encodable: ${error instanceof Error ? error.message : String(error)}`;
  }
  if (typeof text !== 'string') return "handler's result is not JSON-encodable: a function or a symbol";
  return bounded({ bytes: Buffer.from(text, 'utf8'), encoding: 'json' });
}

function bounded(encoded: EncodedPayload): EncodedPayload | string {
  const size = encoded.bytes.byteLength;
  if (size <= RESULT_MAX_BYTES) return encoded;
  return (
    `handler's result is ${size} bytes, over the limit of ${RESULT_MAX_BYTES} bytes (RESULT_MAX_BYTES); ` +
    'store large results elsewhere and return a reference to them'
  );
}

/** A result inside a JSON record (ZooKeeper's state node, etcd's message record): JSON as its text, bytes in base64. */
export interface ResultInRecord {
  readonly result: string;
  /** Absent for JSON. */
  readonly resultEncoding?: 'bytes';
}

export function resultInRecord(encoded: EncodedPayload): ResultInRecord {
  const bytes = Buffer.from(encoded.bytes.buffer, encoded.bytes.byteOffset, encoded.bytes.byteLength);
  if (encoded.encoding === 'bytes') return { result: bytes.toString('base64'), resultEncoding: 'bytes' };
  return { result: bytes.toString('utf8') };
}

/** The `result` field of a status from a record's fields: none when the record has no result. */
export function resultFromRecord(record: Partial<ResultInRecord>): { result?: unknown } {
  const { result } = record;
  if (typeof result !== 'string') return {};
  if (record.resultEncoding === 'bytes') return { result: Buffer.from(result, 'base64') };
  return { result: JSON.parse(result) as unknown };
}
