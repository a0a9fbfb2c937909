import { randomUUID } from 'node:crypto';

let lastMs = 0;
let counter = 0;

/**
 * A new message id in the UUIDv7 layout: 48 bits of milliseconds, a 12-bit
 * counter, then random bits. Ids made by one process sort in creation order,
 * which keeps every store's id index append-mostly (random ids scatter each
 * insert over the whole index and multiply the pages a batch writes).
 */
export function newMessageId(): string {
  let ms = Date.now();
  if (ms > lastMs) {
    lastMs = ms;
    counter = Math.floor(Math.random() * 0x400);
  } else if (++counter > 0xfff) {
    // More than 4096 ids in a millisecond: borrow the next millisecond.
    lastMs += 1;
    counter = 0;
  }
  ms = lastMs;
  const time = ms.toString(16).padStart(12, '0');
  // randomUUID's tail carries the RFC 4122 variant bits and 62 random bits.
  const random = randomUUID().slice(19);
  return `${time.slice(0, 8)}-${time.slice(8)}-7${counter.toString(16).padStart(3, '0')}-${random}`;
}
