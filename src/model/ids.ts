import { randomFillSync } from 'node:crypto';

// Random bytes drawn in blocks: one call per 512 ids instead of one per id.
const POOL_BYTES = 8 * 512;
const pool = Buffer.alloc(POOL_BYTES);
let poolAt = POOL_BYTES;
const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

let lastMs = 0;
let counter = 0;
/** `tttttttt-tttt-7` of lastMs: rebuilt once per millisecond, not per id (a radix-16 toString is slow). */
let prefix = '';

/**
 * A new message id in the UUIDv7 layout: 48 bits of milliseconds, a 12-bit
 * counter, then random bits. Ids made by one process sort in creation order,
 * which keeps every store's id index append-mostly (random ids scatter each
 * insert over the whole index and multiply the pages a batch writes).
 */
export function newMessageId(): string {
  const ms = Date.now();
  if (ms > lastMs) {
    lastMs = ms;
    counter = Math.floor(Math.random() * 0x400);
    prefix = '';
  } else if (++counter > 0xfff) {
    // More than 4096 ids in a millisecond: borrow the next millisecond.
    lastMs += 1;
    counter = 0;
    prefix = '';
  }
  if (prefix === '') {
    const time = lastMs.toString(16).padStart(12, '0');
    prefix = `${time.slice(0, 8)}-${time.slice(8)}-7`;
  }
  if (poolAt === POOL_BYTES) {
    randomFillSync(pool);
    poolAt = 0;
  }
  const b = pool;
  const at = poolAt;
  poolAt += 8;
  // The RFC 4122 variant (binary 10) in the top bits of the fourth group, then 62 random bits.
  const variant = HEX[((b[at] ?? 0) & 0x3f) | 0x80] ?? '';
  return (
    prefix +
    (HEX[counter >> 8] ?? '').slice(1) +
    (HEX[counter & 0xff] ?? '') +
    '-' +
    variant +
    hex(b, at + 1, 1) +
    '-' +
    hex(b, at + 2, 6)
  );
}

function hex(bytes: Buffer, from: number, count: number): string {
  let out = '';
  for (let i = from; i < from + count; i++) out += HEX[bytes[i] ?? 0] ?? '';
  return out;
}
