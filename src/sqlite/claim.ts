import { parseFilterClass } from '../model/filters.js';
import type { Statements, MessageRow, QueueRow } from './statements.js';
import type { ClaimRequest, ClaimResult, ClaimedMessage } from '../store/contract.js';
import type { Metadata } from '../model/types.js';

/**
 * Takes up to `max` messages in one transaction (the caller's): messages
 * whose lock expired first (they waited longest), then ready ones, oldest
 * first, reading only the filter classes the consumer accepts.
 */
export function claimMessages(sql: Statements, queue: string, request: ClaimRequest, now: number): ClaimResult {
  const classes = (sql.classes.all(queue) as string[]).filter((c) => request.accepts === null || request.accepts(c));
  const accepted = new Set(classes);

  const rows: MessageRow[] = [];
  for (const row of sql.expiredLocks.all(queue, now, request.max) as MessageRow[]) {
    if (accepted.has(row.filters)) rows.push(row);
  }
  if (rows.length < request.max) {
    const want = request.max - rows.length;
    const ready: MessageRow[] = [];
    for (const filterClass of classes) ready.push(...(sql.ready.all(queue, filterClass, now, want) as MessageRow[]));
    if (classes.length > 1) ready.sort((a, b) => a.ready_at - b.ready_at || a.seq - b.seq);
    rows.push(...ready.slice(0, want));
  }

  const lockUntil = now + request.lockMs;
  const messages: ClaimedMessage[] = rows.map((row) => {
    sql.lock.run({ seq: row.seq, lockUntil, consumer: request.consumerId, now });
    return {
      id: row.id,
      payload: row.payload,
      encoding: row.encoding === 0 ? 'json' : 'bytes',
      metadata: JSON.parse(row.metadata) as Metadata,
      filters: parseFilterClass(row.filters),
      attempt: row.attempt + 1,
    };
  });

  const queueRow = sql.queueRow.get(queue) as QueueRow;
  if (messages.length > 0) {
    sql.resetDryRuns.run(queue);
    return { messages, queueSize: queueRow.size, dryRuns: 0, wakeAt: null };
  }
  return { messages, queueSize: queueRow.size, ...dryRun(sql, queue, request, queueRow, classes, now) };
}

/**
 * Nothing to take: count a dry run once per queue-wide end-of-queue backoff
 * (Carmine's eoq-backoff flag and ndry-runs), and tell the worker when a
 * backoff or lock ends, so it looks again then even without a wake-up.
 */
function dryRun(
  sql: Statements,
  queue: string,
  request: ClaimRequest,
  queueRow: QueueRow,
  classes: readonly string[],
  now: number,
): { dryRuns: number; wakeAt: number } {
  let dryRuns = queueRow.dry_runs;
  let eoqUntil = queueRow.eoq_until;
  if (eoqUntil <= now) {
    dryRuns += 1;
    eoqUntil = now + request.eoqBackoffMs(dryRuns);
    sql.setDryRuns.run(dryRuns, eoqUntil, queue);
  }
  let wakeAt = eoqUntil;
  for (const filterClass of classes) {
    const next = sql.nextReady.get(queue, filterClass, now) as number | undefined;
    if (next !== undefined) wakeAt = Math.min(wakeAt, next);
  }
  const lockExpiry = sql.nextLockExpiry.get(queue, now) as number | undefined;
  if (lockExpiry !== undefined) wakeAt = Math.min(wakeAt, lockExpiry);
  return { dryRuns, wakeAt };
}
