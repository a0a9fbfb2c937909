/**
 * gRPC's length-prefixed messages (a flag byte, a 4-byte big-endian length, the bytes) reassembled from
 * DATA chunks in linear time, and refused as soon as the prefix declares more than the limit, before any
 * of the message is buffered. Chunks are kept as they come and joined once the message is complete; a
 * message arriving in many small chunks (down to one byte per DATA frame) is instead copied into one
 * buffer of its declared size, so it never holds a million small objects.
 */
import { Code, EtcdError, messageTooLarge } from '../../errors.js';

const PREFIX_BYTES = 5;
/** Past this many chunks, a message is copied into one buffer as it comes. */
const MAX_CHUNKS = 64;

/** Takes the messages a reader completes (a call object, so no closure is made per chunk). */
export interface MessageTarget {
  onMessage(message: Buffer): void;
}

export class MessageReader {
  private chunks: Buffer[] = [];
  private buffered = 0;
  /** Prefix and body of the message being read, once its prefix is in; -1 before. */
  private expected = -1;
  /** The message being copied into one buffer, prefix included; null while chunks are kept. */
  private whole: Buffer | null = null;

  constructor(private readonly limit: number) {}

  /** Bytes held (or set aside) for a message not yet complete. */
  get pending(): number {
    return this.whole === null ? this.buffered : this.expected;
  }

  /** Adds a chunk; `target` gets each message it completes. Returns the error that ends the call, if any. */
  push(chunk: Buffer, target: MessageTarget): EtcdError | null {
    let input = chunk;
    while (input.length > 0) {
      const whole = this.whole;
      if (whole !== null) {
        const taken = input.copy(whole, this.buffered, 0, this.expected - this.buffered);
        this.buffered += taken;
        input = input.subarray(taken);
        if (this.buffered < this.expected) return null;
        this.clear();
        target.onMessage(whole.subarray(PREFIX_BYTES));
        continue;
      }
      this.chunks.push(input);
      this.buffered += input.length;
      input = Buffer.alloc(0);
      for (;;) {
        if (this.expected < 0) {
          if (this.buffered < PREFIX_BYTES) return null;
          const prefix = this.peekPrefix();
          const length = prefix.readUInt32BE(1);
          // A compressed message: grpc-encoding was identity or absent (anything else is refused at the headers).
          if (prefix[0] !== 0) {
            return new EtcdError(Code.INTERNAL, 'grpc: compressed flag set with identity or empty encoding');
          }
          if (length > this.limit) return messageTooLarge(length, this.limit);
          this.expected = PREFIX_BYTES + length;
        }
        if (this.buffered < this.expected) {
          if (this.chunks.length > MAX_CHUNKS) this.startCopying();
          return null;
        }
        const all = this.chunks.length === 1 ? (this.chunks[0] as Buffer) : Buffer.concat(this.chunks, this.buffered);
        const message = all.subarray(PREFIX_BYTES, this.expected);
        const rest = all.subarray(this.expected);
        this.chunks = rest.length > 0 ? [rest] : [];
        this.buffered = rest.length;
        this.expected = -1;
        target.onMessage(message);
      }
    }
    return null;
  }

  /** Drops what is held: the call is over. */
  clear(): void {
    this.chunks = [];
    this.buffered = 0;
    this.expected = -1;
    this.whole = null;
  }

  private startCopying(): void {
    const whole = Buffer.allocUnsafe(this.expected);
    let at = 0;
    for (const chunk of this.chunks) at += chunk.copy(whole, at);
    this.chunks = [];
    this.whole = whole;
  }

  /** The first five bytes, which may span several (even one-byte) chunks. */
  private peekPrefix(): Buffer {
    const first = this.chunks[0] as Buffer;
    if (first.length >= PREFIX_BYTES) return first;
    const prefix = Buffer.allocUnsafe(PREFIX_BYTES);
    let at = 0;
    for (const chunk of this.chunks) {
      at += chunk.copy(prefix, at, 0, Math.min(chunk.length, PREFIX_BYTES - at));
      if (at === PREFIX_BYTES) break;
    }
    return prefix;
  }
}
