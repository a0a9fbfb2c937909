/**
 * 64-bit integers between the generated codecs (a `Long`, or a number when it was given as one) and the
 * engine, which counts revisions in numbers (a revision past 2^53 is not reachable) and keeps lease and
 * member IDs as exact bigints.
 */
import Long from 'long';

export type Int64 = number | Long;

export function toNumber(value: Int64 | null | undefined): number {
  if (value === null || value === undefined) return 0;
  return typeof value === 'number' ? value : value.toNumber();
}

/** A 64-bit value as a bigint: signed for int64 fields (lease IDs), unsigned for uint64 (member IDs). */
export function toBigInt(value: Int64 | null | undefined): bigint {
  if (value === null || value === undefined) return 0n;
  if (typeof value === 'number') return BigInt(value);
  const bits = (BigInt(value.high >>> 0) << 32n) | BigInt(value.low >>> 0);
  return value.unsigned ? bits : BigInt.asIntN(64, bits);
}

/** A bigint as the encoders take a 64-bit value: a number when exact, else its two halves. */
export function fromBigInt(value: bigint): Int64 {
  if (value >= -0x1fffffffffffffn && value <= 0x1fffffffffffffn) return Number(value);
  const bits = BigInt.asUintN(64, value);
  return Long.fromBits(Number(bits & 0xffffffffn) | 0, Number(bits >> 32n) | 0);
}
