import { parseFilterClass } from '../../model/filters.js';
import { maxDeliveriesError } from '../../model/history.js';
import { rateCharge, rateGrant } from '../../model/rate-limit.js';
import { takeReady, takesGroupSlot, type GroupLimit } from './claim-ready.js';
import { GroupRates } from './group-rates.js';
import { failMessage, historyWith, type WriteContext } from './failures.js';
import { pendingRanges } from './pending.js';
import type { MessageRow, QueueRow, Statements } from './statements.js';
import type { ClaimRequest, ClaimResult, ClaimedMessage } from '../contract/contract.js';
import type { Metadata } from '../../model/types.js';

// A paused queue's workers look again this soon, wake-up or not.
const PAUSED_RECHECK_MS = 1000;

interface ExpiredRow extends MessageRow {
  readonly consumer: string | null;
  readonly losses: number;
  readonly history: string | null;
  readonly group_name: string | null;
  readonly parent_wait: number;
}

/**
 * Takes up to `max` messages in one transaction (the caller's): messages
 * whose lock expired first (they waited longest), then ready ones by
 * priority, oldest first within one, reading only the filter classes the
 * consumer accepts (claim-ready.ts). Nothing while the queue is paused.
 * Taking an expired lock counts a lost delivery; at the queue's
 * `maxDeliveries` the message fails instead of being delivered again.
 * Under a rate limit the claim takes at most what it grants, and charges what
 * it took; under a group limit no group gets past `groupConcurrency` held.
 */
export function claimMessages(tx: WriteContext, queueRow: QueueRow, request: ClaimRequest): ClaimResult {
  const { sql, queue, now } = tx;
  const config = tx.config();
  if (config.paused) {
    return { messages: [], queueSize: queueRow.size, dryRuns: queueRow.dry_runs, wakeAt: now + PAUSED_RECHECK_MS };
  }
  const limit = config.rateLimit;
  const grant = limit === null ? null : rateGrant(limit, queueRow.rate_tat, now, request.max);
  if (grant?.granted === 0) {
    // Not a dry run: the queue may be full; the worker sleeps until the next slot (or a wake-up).
    return { messages: [], queueSize: queueRow.size, dryRuns: queueRow.dry_runs, wakeAt: grant.wakeAt };
  }
  const max = grant === null ? request.max : grant.granted;
  const classes = (sql.classes.all(queue) as string[]).filter((c) => request.accepts === null || request.accepts(c));
  const accepted = new Set(classes);
  const rates =
    config.groupRateLimit === null
      ? null
      : new GroupRates(
          config.groupRateLimit,
          now,
          (group) => (sql.groupRateTat.get(queue, group) as number | undefined) ?? 0,
        );
  const groups: GroupLimit | null =
    config.groupConcurrency === null && rates === null
      ? null
      : {
          max: config.groupConcurrency ?? Infinity,
          held:
            config.groupConcurrency === null
              ? new Map<string, number>()
              : new Map(
                  (sql.heldGroups.all(queue, now) as { group_name: string; n: number }[]).map((r) => [
                    r.group_name,
                    r.n,
                  ]),
                ),
          ...(rates === null ? {} : { rate: rates }),
        };

  const lock = { lockUntil: now + request.lockMs, consumer: request.consumerId, now, queue };
  const rows: MessageRow[] = [];
  let failed = 0;
  for (const expired of sql.expiredLocks.all(queue, now, max) as ExpiredRow[]) {
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
    } else if (accepted.has(expired.filters) && takesGroupSlot(groups, expired.group_name)) {
      rows.push(sql.relock.get({ ...lock, seq: expired.seq, losses, history }) as MessageRow);
    }
  }
  if (rows.length < max) rows.push(...takeReady(sql, lock, classes, max - rows.length, groups));
  if (limit !== null && grant !== null && rows.length > 0) {
    sql.setRateTat.run(rateCharge(limit, grant, rows.length), queue);
  }
  for (const [group, tat] of rates?.charged() ?? []) sql.setGroupRateTat.run(queue, group, tat);

  for (const row of rows) tx.event('started', row.id, row.attempt);
  const messages = rows.map((row) => claimedMessage(row, request.lockMs));

  const queueSize = queueRow.size - failed;
  if (messages.length > 0) {
    sql.resetDryRuns.run(queue);
    return { messages, queueSize, dryRuns: 0, wakeAt: null };
  }
  // Only messages of groups over their rate waited: not a dry run; look again at the first group's next slot.
  if (rates !== null && rates.wakeAt !== Infinity) {
    return { messages, queueSize, dryRuns: queueRow.dry_runs, wakeAt: rates.wakeAt };
  }
  return { messages, queueSize, ...dryRun(sql, queue, request, queueRow, classes, now) };
}

/**
 * A claimed row as the worker gets it. Every lock a claim takes ends at now + lockMs, `now` read after the
 * worker sent the claim. Shared with the PostgreSQL store, whose rows are the same.
 */
export function claimedMessage(row: ClaimedRow, lockMs: number): ClaimedMessage {
  return {
    id: row.id,
    payload: row.payload,
    encoding: row.encoding === 0 ? 'json' : 'bytes',
    metadata: JSON.parse(row.metadata) as Metadata,
    filters: parseFilterClass(row.filters),
    attempt: row.attempt,
    policy: row.policy,
    lockLeftMs: lockMs,
  };
}

/** The columns claimedMessage reads. */
export type ClaimedRow = Pick<
  MessageRow,
  'id' | 'payload' | 'encoding' | 'metadata' | 'filters' | 'attempt' | 'policy'
>;

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
  // The earliest backoff end of each class and priority present.
  for (const { filters, priority } of pendingRanges(sql, queue, classes)) {
    const next = sql.nextReady.get(queue, filters, priority, now) as number | undefined;
    if (next !== undefined) wakeAt = Math.min(wakeAt, next);
  }
  const lockExpiry = sql.nextLockExpiry.get(queue, now) as number | undefined;
  if (lockExpiry !== undefined) wakeAt = Math.min(wakeAt, lockExpiry);
  return { dryRuns, wakeAt };
}
