/** A new message's stored columns, shared by the enqueue paths. */
import type { NewMessage } from '../contract/contract.js';

/** A message's stored columns: payload, encoding, metadata, filter class, ready_at, enqueued_at. */
export function content(
  m: NewMessage,
  now: number,
  readyAt = now + m.initialBackoffMs,
): [Buffer, number, string, string, number, number] {
  return [asBuffer(m.payload), m.encoding === 'json' ? 0 : 1, JSON.stringify(m.metadata), m.filterClass, readyAt, now];
}

export function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
