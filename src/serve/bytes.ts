/** Byte-string helpers: etcd keys are bytes, ordered as unsigned bytes. */

export const EMPTY = Buffer.alloc(0);

/** A key as a Map/Set key: latin1 maps each byte to one character, so order and equality are kept. */
export function keyString(key: Uint8Array): string {
  return Buffer.from(key.buffer, key.byteOffset, key.byteLength).toString('latin1');
}

export function keyBytes(key: string): Buffer {
  return Buffer.from(key, 'latin1');
}

export function compareBytes(a: Uint8Array, b: Uint8Array): number {
  return Buffer.compare(a, b);
}

/**
 * What a request's range_end means: a single key when empty, every key from
 * `key` on when it is the single byte 0 (etcd's "\0"), else [key, rangeEnd).
 */
export type KeyRange =
  | { readonly kind: 'key'; readonly key: Buffer }
  | { readonly kind: 'from'; readonly key: Buffer }
  | { readonly kind: 'range'; readonly key: Buffer; readonly end: Buffer };

export function keyRange(key: Buffer, rangeEnd: Buffer): KeyRange {
  if (rangeEnd.length === 0) return { kind: 'key', key };
  if (rangeEnd.length === 1 && rangeEnd[0] === 0) return { kind: 'from', key };
  return { kind: 'range', key, end: rangeEnd };
}

/** Whether `key` falls in the range. */
export function inRange(range: KeyRange, key: Uint8Array): boolean {
  switch (range.kind) {
    case 'key':
      return Buffer.compare(key, range.key) === 0;
    case 'from':
      return Buffer.compare(key, range.key) >= 0;
    case 'range':
      return Buffer.compare(key, range.key) >= 0 && Buffer.compare(key, range.end) < 0;
  }
}
