import { randomUUID } from 'node:crypto';
import { list, num } from './codec.js';
import { trimEvents } from './events.js';
import { SCRIPTS } from './scripts.generated.js';
import type { Scripts } from './scripts.js';
import type { GcResult, QueueConfig } from '../../model/types.js';

// A crashed GC's lock lapses after this.
const GC_LOCK_MS = 60_000;
// Finished messages looked at per script call, so a large GC never blocks Redis for long.
const GC_PAGE = 1000;

/**
 * GC of finished messages past the lifetime (failed ones past theirs) or beyond the count kept, the exact trim of the queue's events,
 * then of lapsed consumers, under the queue's GC lock (one GC at a time; unless forced, at most once per
 * interval).
 */
export async function collectGarbage(
  scripts: Scripts,
  queue: string,
  config: QueueConfig,
  force: boolean,
): Promise<GcResult> {
  const token = randomUUID();
  const took = await scripts.run(SCRIPTS.gcStart, queue, [force ? 1 : 0, config.gcIntervalMs, GC_LOCK_MS, token]);
  if (took !== 1) return { ran: false, removed: 0 };
  let removed = 0;
  try {
    // Expired messages first: one failed now is removed with the failed ones once past its lifetime.
    while (num(list(await scripts.run(SCRIPTS.gcExpire, queue, [GC_PAGE]))[1]) === GC_PAGE);
    for (const [which, lifetime, keep] of [
      ['done', config.gcLifetimeMs, config.keepDone],
      ['failed', config.failedLifetimeMs, config.keepFailed],
    ] as const) {
      // Entries kept (still refusing duplicates) stay first in line: skip past them.
      let offset = 0;
      for (;;) {
        const args = [which, lifetime, offset, GC_PAGE, keep ?? ''];
        const reply = list(await scripts.run(SCRIPTS.gcSweep, queue, args));
        const [gone, looked] = reply.map(num);
        removed += gone ?? 0;
        offset += (looked ?? 0) - (gone ?? 0);
        if ((looked ?? 0) < GC_PAGE) break;
      }
    }
    await trimEvents(scripts, queue, config);
  } finally {
    await scripts.run(SCRIPTS.gcFinish, queue, [token]);
  }
  return { ran: true, removed };
}
