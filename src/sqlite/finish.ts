import { Phase } from './schema.js';
import type { ChunkedStatement } from './chunked.js';
import type { Statements } from './statements.js';
import type { Finish, FinishResult } from '../store/contract.js';

interface HeldRow {
  readonly seq: number;
  readonly phase: number;
  readonly consumer: string | null;
  readonly attempt: number;
  readonly requeue: number;
}

export interface FinishOutcome {
  readonly results: FinishResult[];
  readonly readyNow: boolean;
}

/**
 * Records handler outcomes in one transaction (the caller's). Only the
 * consumer that holds the message, for the attempt it was handed, may finish
 * it: a late finish after the lock expired and another consumer took it is
 * `lost`. A message marked for requeue goes back to the queue with attempt 0
 * (after its backoff, if the outcome set one) and the replacement payload.
 */
export function finishMessages(
  sql: Statements,
  finishSuccesses: ChunkedStatement,
  queue: string,
  consumerId: string,
  finishes: readonly Finish[],
  now: number,
): FinishOutcome {
  // Plain successes, the common case, go in multi-row updates; the rest one by one.
  const plain = finishes.filter((f) => f.outcome === 'success' && f.backoffMs === 0 && f.error === null);
  const rows = plain.map((f) => [f.id, f.attempt]);
  const done = new Set(finishSuccesses([now, queue, consumerId], rows) as string[]);
  let doneCount = done.size;

  const results: FinishResult[] = [];
  let readyNow = false;
  for (const f of finishes) {
    if (done.delete(f.id)) {
      results.push('ok');
      continue;
    }
    const row = sql.held.get(queue, f.id) as HeldRow | undefined;
    if (row?.phase !== Phase.Locked || row.consumer !== consumerId || row.attempt !== f.attempt) {
      results.push('lost');
      continue;
    }
    const common = { seq: row.seq, outcome: f.outcome, error: f.error, now };
    if (f.outcome === 'retry') {
      sql.toPending.run({ ...common, readyAt: now + f.backoffMs, requeue: 0, resetAttempt: 0 });
      readyNow ||= f.backoffMs === 0;
    } else if (row.requeue === 1) {
      // With a backoff the requeued run waits in `done-with-requeue`.
      const waits = f.backoffMs > 0 ? 1 : 0;
      sql.toPending.run({ ...common, readyAt: now + f.backoffMs, requeue: waits, resetAttempt: 1 });
      readyNow ||= waits === 0;
    } else {
      sql.toDone.run({ ...common, backoffUntil: now + f.backoffMs });
      doneCount += 1;
    }
    results.push('ok');
  }
  if (doneCount > 0) sql.addSize.run(-doneCount, queue);
  return { results, readyNow };
}
