import { parseFilterClass } from '../model/filters.js';
import { maxDeliveriesError } from '../model/history.js';
import { failMessage, historyWith, type WriteContext } from './failures.js';
import type { MessageRow, QueueRow, Statements } from './statements.js';
import type { ClaimRequest, ClaimResult, ClaimedMessage } from '../store/contract.js';
import type { Metadata } from '../model/types.js';

// A paused queue's workers look again this soon, wake-up or not.
const PAUSED_RECHECK_MS = 1000;

interface ExpiredRow extends MessageRow {
  readonly consumer: string | null;
  readonly losses: number;
  readonly history: string | null;
}

/**
 * Takes up to `max` messages in one transaction (the caller's): messages
 * whose lock expired first (they waited longest), then ready ones, oldest
 * first, reading only the filter classes the consumer accepts. Nothing while
 * the queue is paused. Taking an expired lock counts a lost delivery; at the
 * queue's `maxDeliveries` the message fails instead of being delivered again.
 */
export function claimMessages(tx: WriteContext, queueRow: QueueRow, request: ClaimRequest): ClaimResult {
  const { sql, queue, now } = tx;
  if (tx.config().paused) {
    return { messages: [], queueSize: queueRow.size, dryRuns: queueRow.dry_runs, wakeAt: now + PAUSED_RECHECK_MS };
  }
  const classes = (sql.classes.all(queue) as string[]).filter((c) => request.accepts === null || request.accepts(c));
  const accepted = new Set(classes);

  const lock = { lockUntil: now + request.lockMs, consumer: request.consumerId, now, queue };
  const rows: MessageRow[] = [];
  let failed = 0;
  for (const expired of sql.expiredLocks.all(queue, now, request.max) as ExpiredRow[]) {
    const losses = expired.losses + 1;
    const maxDeliveries = tx.config().maxDeliveries;
    const history = historyWith(expired.history, {
      attempt: expired.attempt,
      startedAt: null,
      endedAt: now,
      consumer: expired.consumer,
      outcome: 'lost',
      error: null,
    });
    if (maxDeliveries > 0 && losses >= maxDeliveries) {
      failMessage(tx, expired, maxDeliveriesError(losses), history);
      failed += 1;
    } else if (accepted.has(expired.filters)) {
      rows.push(sql.relock.get({ ...lock, seq: expired.seq, losses, history }) as MessageRow);
    }
  }
  if (rows.length < request.max) {
    const ready: MessageRow[] = [];
    for (const filters of classes) {
      ready.push(...(sql.lockReady.all({ ...lock, filters, limit: request.max - rows.length }) as MessageRow[]));
    }
    ready.sort((a, b) => a.ready_at - b.ready_at || a.seq - b.seq);
    if (classes.length > 1) {
      // Each class gave its oldest; keep the oldest overall and put the rest back untouched.
      for (const extra of ready.splice(request.max - rows.length)) sql.unlock.run(extra.seq);
    }
    rows.push(...ready);
  }

  for (const row of rows) tx.event('started', row.id, row.attempt);
  const messages: ClaimedMessage[] = rows.map((row) => ({
    id: row.id,
    payload: row.payload,
    encoding: row.encoding === 0 ? 'json' : 'bytes',
    metadata: JSON.parse(row.metadata) as Metadata,
    filters: parseFilterClass(row.filters),
    attempt: row.attempt,
    policy: row.policy,
  }));

  const queueSize = queueRow.size - failed;
  if (messages.length > 0) {
    sql.resetDryRuns.run(queue);
    return { messages, queueSize, dryRuns: 0, wakeAt: null };
  }
  return { messages, queueSize, ...dryRun(sql, queue, request, queueRow, classes, now) };
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
