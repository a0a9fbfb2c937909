/**
 * Encoding with the generated encoders through one Writer, reused: a new Writer allocates a buffer up
 * front and another when finished, which for small responses costs as much as the encoding. Encoders run
 * synchronously, so one Writer serves every call; the result is copied out of it.
 */
import protobuf from 'protobufjs/minimal.js';

export interface Encoder<T> {
  encode(message: T, writer?: protobuf.Writer): protobuf.Writer;
}

/** A Writer grown past this by a large response is dropped rather than kept. */
const KEEP_BYTES = 1024 * 1024;

let shared = protobuf.Writer.create();

/** `message` encoded as `type`, then whatever `append` writes after it (fields pre-encoded elsewhere). */
export function encodeMessage<T>(type: Encoder<T>, message: T, append?: (writer: protobuf.Writer) => void): Buffer {
  const writer = shared;
  writer.pos = 0;
  try {
    type.encode(message, writer);
    append?.(writer);
  } catch (error) {
    // Left mid-message (open length prefixes): start over with a fresh one.
    shared = protobuf.Writer.create();
    throw error;
  }
  const out = Buffer.allocUnsafe(writer.pos);
  (writer.buf as Buffer).copy(out, 0, 0, writer.pos);
  if (writer.buf.length > KEEP_BYTES) shared = protobuf.Writer.create();
  return out;
}

/** Bytes a varint of this non-negative number takes. */
export function varintSize(value: number): number {
  let size = 1;
  while (value >= 0x80) {
    value = Math.floor(value / 128);
    size++;
  }
  return size;
}
