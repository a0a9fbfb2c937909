import { PayloadTooLargeError } from './errors.js';
import type { Payload } from './types.js';

/** How payload bytes are to be read back: JSON text, or bytes as given. */
export type PayloadEncoding = 'json' | 'bytes';

export interface EncodedPayload {
  readonly bytes: Uint8Array;
  readonly encoding: PayloadEncoding;
}

/** Bytes stay bytes; anything else is JSON. `undefined` and functions are refused. */
export function encodePayload(payload: Payload, limit: number): EncodedPayload {
  let encoded: EncodedPayload;
  if (payload instanceof Uint8Array) {
    encoded = { bytes: payload, encoding: 'bytes' };
  } else {
    const text = payload === undefined ? undefined : JSON.stringify(payload);
    if (text === undefined) {
      throw new TypeError('payload must be a JSON value or a Uint8Array/Buffer; got undefined or a function');
    }
    encoded = { bytes: Buffer.from(text, 'utf8'), encoding: 'json' };
  }
  if (encoded.bytes.byteLength > limit) throw new PayloadTooLargeError(encoded.bytes.byteLength, limit);
  return encoded;
}

export function decodePayload(bytes: Uint8Array, encoding: PayloadEncoding): Payload {
  if (encoding === 'bytes') return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  // Stores hand Buffers back: read them as they are, without a second view of the same bytes.
  const text = Buffer.isBuffer(bytes)
    ? bytes.toString('utf8')
    : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
  return JSON.parse(text) as Payload;
}

/** The payload as bytes, whatever its encoding: what `kvmq work` writes to a command's stdin. */
export function payloadBytes(payload: Payload): Buffer {
  if (payload instanceof Uint8Array) return Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength);
  return Buffer.from(typeof payload === 'string' ? payload : JSON.stringify(payload), 'utf8');
}

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
// C0 and C1 controls and DEL, but not the whitespace among them (tab, line feed, vertical tab, form feed, CR).
// eslint-disable-next-line no-control-regex -- control characters are what makes bytes unreadable as text
const CONTROL = /[\u0000-\u0008\u000e-\u001f\u007f-\u009f]/;

/** Text with no control character but whitespace: it reads as it is. */
export function isPrintable(text: string): boolean {
  return !CONTROL.test(text);
}

/**
 * Bytes as text when they are text: valid UTF-8 with no control character but whitespace, as a payload put by
 * `kvmq enqueue`, etcdctl or curl is; null for anything else (an image, a protobuf), which is shown as bytes.
 */
export function printableText(bytes: Uint8Array): string | null {
  let text: string;
  try {
    text = UTF8.decode(bytes);
  } catch {
    return null;
  }
  return isPrintable(text) ? text : null;
}
