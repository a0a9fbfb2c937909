/**
 * The ranges of the pending index: one per (filter class, priority) holding
 * pending messages. Reads ordered by ready time (counts of backoffs, listings,
 * the next backoff end) read each range and merge, as the index leads with
 * the class and the priority.
 */
import type { Statements } from './statements.js';

export interface PendingRange {
  readonly filters: string;
  readonly priority: number;
}

/** Every (class, priority) with pending messages: a seek per range found, never a walk of the backlog. */
export function pendingRanges(sql: Statements, queue: string, classes?: readonly string[]): PendingRange[] {
  const ranges: PendingRange[] = [];
  for (const filters of classes ?? (sql.classes.all(queue) as string[])) {
    for (
      let priority = sql.nextPriority.get(queue, filters, -1) as number | undefined;
      priority !== undefined;
      priority = sql.nextPriority.get(queue, filters, priority) as number | undefined
    ) {
      ranges.push({ filters, priority });
    }
  }
  return ranges;
}
