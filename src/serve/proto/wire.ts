/**
 * Protocol-buffer wire format, by hand: the server's hot messages are decoded
 * and encoded here rather than through a generic reflection codec, because
 * per-request CPU is what a light server is measured by.
 *
 * int64 fields that hold revisions and counts decode to numbers (a revision
 * past 2^53 is not reachable); lease and member IDs use the full 64 bits and
 * decode to bigint.
 */

const TWO_32 = 4294967296;

/** Raised for bytes that are not a valid message of the expected type. */
export class WireError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WireError';
  }
}

export const WIRE_VARINT = 0;
export const WIRE_I64 = 1;
export const WIRE_LEN = 2;
export const WIRE_I32 = 5;

const EMPTY = Buffer.alloc(0);

export class Reader {
  pos: number;

  constructor(
    readonly buf: Buffer,
    start = 0,
    readonly end = buf.length,
  ) {
    this.pos = start;
  }

  get done(): boolean {
    return this.pos >= this.end;
  }

  /** A field's tag: field number and wire type in one number (fieldNumber * 8 + wireType). */
  tag(): number {
    return this.uint32();
  }

  /** The low 32 bits of a varint, as an unsigned number; the rest of the varint is skipped. */
  uint32(): number {
    const buf = this.buf;
    let pos = this.pos;
    let result = 0;
    let shift = 0;
    for (;;) {
      if (pos >= this.end) throw new WireError('truncated varint');
      const byte = buf[pos++] as number;
      if (shift < 28) result |= (byte & 0x7f) << shift;
      else if (shift === 28) result |= (byte & 0x0f) << 28;
      if (byte < 0x80) break;
      shift += 7;
      if (shift > 63) throw new WireError('varint longer than 10 bytes');
    }
    this.pos = pos;
    return result >>> 0;
  }

  /** A varint as its two 32-bit halves. */
  private varint64(): [number, number] {
    const buf = this.buf;
    let pos = this.pos;
    let lo = 0;
    let hi = 0;
    let shift = 0;
    for (;;) {
      if (pos >= this.end) throw new WireError('truncated varint');
      const byte = buf[pos++] as number;
      const bits = byte & 0x7f;
      if (shift < 28) lo |= bits << shift;
      else if (shift === 28) {
        lo |= (bits & 0x0f) << 28;
        hi |= bits >>> 4;
      } else hi |= bits << (shift - 32);
      if (byte < 0x80) break;
      shift += 7;
      if (shift > 63) throw new WireError('varint longer than 10 bytes');
    }
    this.pos = pos;
    return [lo >>> 0, hi >>> 0];
  }

  /** An int64 as a number (negative values keep their sign; magnitudes past 2^53 lose precision). */
  int64(): number {
    const [lo, hi] = this.varint64();
    if (hi === 0) return lo;
    // Negative: two's complement, negated in 32-bit halves so small magnitudes stay exact.
    if (hi >= 0x80000000) return -((~hi >>> 0) * TWO_32 + (~lo >>> 0) + 1);
    return hi * TWO_32 + lo;
  }

  /** A uint64 or int64 as a bigint, exactly (signed when `signed`). */
  int64Big(signed = true): bigint {
    const [lo, hi] = this.varint64();
    const value = (BigInt(hi) << 32n) | BigInt(lo);
    return signed ? BigInt.asIntN(64, value) : value;
  }

  bool(): boolean {
    const [lo, hi] = this.varint64();
    return lo !== 0 || hi !== 0;
  }

  /** A length-delimited field's bytes, without copying. */
  bytes(): Buffer {
    const length = this.uint32();
    const start = this.pos;
    const end = start + length;
    if (end > this.end) throw new WireError('truncated length-delimited field');
    this.pos = end;
    return length === 0 ? EMPTY : this.buf.subarray(start, end);
  }

  string(): string {
    const length = this.uint32();
    const start = this.pos;
    const end = start + length;
    if (end > this.end) throw new WireError('truncated string');
    this.pos = end;
    return this.buf.toString('utf8', start, end);
  }

  /** A reader over an embedded message's bytes. */
  message(): Reader {
    const length = this.uint32();
    const start = this.pos;
    const end = start + length;
    if (end > this.end) throw new WireError('truncated embedded message');
    this.pos = end;
    return new Reader(this.buf, start, end);
  }

  /** Skips a field this decoder does not know, as protobuf requires. */
  skip(wireType: number): void {
    switch (wireType) {
      case WIRE_VARINT:
        this.varint64();
        return;
      case WIRE_I64:
        this.pos += 8;
        break;
      case WIRE_LEN: {
        const length = this.uint32();
        this.pos += length;
        break;
      }
      case WIRE_I32:
        this.pos += 4;
        break;
      default:
        throw new WireError(`unknown wire type ${wireType}`);
    }
    if (this.pos > this.end) throw new WireError('truncated field');
  }

  /** Repeated enum values, packed or not. */
  enums(wireType: number, into: number[]): void {
    if (wireType === WIRE_LEN) {
      const inner = this.message();
      while (!inner.done) into.push(inner.uint32() | 0);
    } else into.push(this.uint32() | 0);
  }
}

/** Bytes a varint of this non-negative number takes. */
export function varintSize(value: number): number {
  if (value < 0) return 10;
  if (value < 0x80) return 1;
  if (value < 0x4000) return 2;
  if (value < 0x200000) return 3;
  if (value < 0x10000000) return 4;
  if (value < 0x800000000) return 5;
  if (value < 0x40000000000) return 6;
  if (value < 0x2000000000000) return 7;
  if (value < 0x100000000000000) return 8;
  return 9;
}

export function varintSizeBig(value: bigint): number {
  let v = BigInt.asUintN(64, value);
  let size = 1;
  while (v >= 0x80n) {
    v >>= 7n;
    size++;
  }
  return size;
}

/** Size of a length-delimited field with a one-byte tag. */
export function lenFieldSize(length: number): number {
  return 1 + varintSize(length) + length;
}

/**
 * Writes into a buffer sized in advance by the encoder (which computes each
 * message's size first, as length-delimited fields need it up front).
 */
export class Writer {
  readonly buf: Buffer;
  pos = 0;

  constructor(size: number) {
    this.buf = Buffer.allocUnsafe(size);
  }

  uint(value: number): void {
    const buf = this.buf;
    let pos = this.pos;
    if (value < 0) {
      this.negative(value);
      return;
    }
    while (value >= 0x80) {
      buf[pos++] = (value & 0x7f) | 0x80;
      value = value >= TWO_32 ? Math.floor(value / 128) : value >>> 7;
    }
    buf[pos++] = value;
    this.pos = pos;
  }

  /** A negative int64 as protobuf writes it: ten bytes of two's complement. */
  private negative(value: number): void {
    this.big(BigInt(value));
  }

  big(value: bigint): void {
    let v = BigInt.asUintN(64, value);
    const buf = this.buf;
    let pos = this.pos;
    while (v >= 0x80n) {
      buf[pos++] = Number(v & 0x7fn) | 0x80;
      v >>= 7n;
    }
    buf[pos++] = Number(v);
    this.pos = pos;
  }

  /** A one-byte tag (field numbers 1..15). */
  tag(field: number, wireType: number): void {
    this.buf[this.pos++] = (field << 3) | wireType;
  }

  /** Any tag, for field numbers past 15. */
  longTag(field: number, wireType: number): void {
    this.uint(field * 8 + wireType);
  }

  bytes(data: Uint8Array): void {
    this.uint(data.length);
    this.buf.set(data, this.pos);
    this.pos += data.length;
  }

  raw(data: Uint8Array): void {
    this.buf.set(data, this.pos);
    this.pos += data.length;
  }

  finish(): Buffer {
    if (this.pos !== this.buf.length) {
      throw new Error(`encoder sized ${this.buf.length} bytes but wrote ${this.pos}`);
    }
    return this.buf;
  }
}
