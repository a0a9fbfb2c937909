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
