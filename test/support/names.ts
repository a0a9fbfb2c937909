import { randomBytes } from 'node:crypto';

let counter = 0;

/** A queue name no other test (or earlier run) uses: the label, then a unique suffix. */
export function uniqueQueue(label = 'q'): string {
  counter += 1;
  const safe = label.replace(/[^A-Za-z0-9_.-]/g, '-').slice(0, 60);
  return `${safe}-${process.pid}-${counter}-${randomBytes(3).toString('hex')}`;
}
