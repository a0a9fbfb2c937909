/**
 * Claims in one transaction: messages whose lock ended first (they waited longest; taking one counts a lost
 * delivery, and at the queue's `maxDeliveries` fails it instead), then ready ones by priority, oldest first
 * within one, from the pending index of each class the consumer accepts, `FOR UPDATE SKIP LOCKED` so
 * concurrent claims pass each other instead of queueing. Nothing while the queue is paused. Under a rate
 * limit or a group limit, claims of the queue take turns on its row (each must see what the last one took).
 */
import { maxDeliveriesError } from '../../model/history.js';
import { rateCharge, rateGrant } from '../../model/rate-limit.js';
import { failMessage, historyWith } from './failures.js';
import { nextTimesSql, pendingRanges } from './ranges.js';
import type { WriteContext } from './tx.js';
import type { ClaimRequest, ClaimResult } from '../contract/contract.js';
// Claimed rows and group limits are SQLite's: one statement of them for both stores.
import { claimedMessage, type ClaimedRow as SqliteClaimedRow } from '../sqlite/claim.js';
import { takesGroupSlot, type GroupLimit } from '../sqlite/claim-ready.js';
import { GroupRates } from '../sqlite/group-rates.js';
import type { RateLimit } from '../../model/types.js';

// A paused queue's workers look again this soon, wake-up or not.
const PAUSED_RECHECK_MS = 1000;
// Candidates read per step under a group limit; more follow when skipped ones leave the claim short.
const CANDIDATE_PAGE = 64;

export const CLAIMED_FIELDS =
  'm.seq, m.id, m.payload, m.encoding, m.metadata, m.filters, m.attempt, m.policy, m.priority, m.ready_at';

interface ClaimedRow extends SqliteClaimedRow {
  readonly seq: number;
  readonly filters: string;
  readonly priority: number;
  readonly ready_at: number;
}

interface ExpiredRow extends ClaimedRow {
  readonly consumer: string | null;
  readonly losses: number;
  readonly history: string | null;
  readonly group_name: string | null;
  readonly parent_wait: number;
}

/** `released`: messages of dead consumers this transaction just freed (release.ts), which it may take. */
export async function claimMessages(tx: WriteContext, request: ClaimRequest, released = 0): Promise<ClaimResult> {
  const { db, s, queue, now, row, config } = tx;
  if (config.paused) {
    return { messages: [], queueSize: row.size, dryRuns: row.dry_runs, wakeAt: now + PAUSED_RECHECK_MS };
  }
  const limit = config.rateLimit;
  let rateTat = row.rate_tat;
  if (limit !== null || config.groupConcurrency !== null || config.groupRateLimit !== null) {
    const locked = await db.query<{ rate_tat: number }>(
      `SELECT rate_tat FROM ${s}.queues WHERE queue = $1 FOR UPDATE`,
      [queue],
    );
    rateTat = locked.rows[0]?.rate_tat ?? 0;
  }
  const grant = limit === null ? null : rateGrant(limit, rateTat, now, request.max);
  if (grant?.granted === 0) {
    // Not a dry run: the queue may be full; the worker sleeps until the next slot (or a wake-up).
    return { messages: [], queueSize: row.size, dryRuns: row.dry_runs, wakeAt: grant.wakeAt };
  }
  const max = grant === null ? request.max : grant.granted;
  const classes = row.classes.filter((c) => request.accepts === null || request.accepts(c));
  const accepted = new Set(classes);
  const rates = config.groupRateLimit === null ? null : await groupRates(tx, config.groupRateLimit);
  const groups =
    config.groupConcurrency === null && rates === null
      ? null
      : {
          ...(config.groupConcurrency === null
            ? { max: Infinity, held: new Map<string, number>() }
            : await heldGroups(tx, config.groupConcurrency)),
          ...(rates === null ? {} : { rate: rates }),
        };
  const lockUntil = now + request.lockMs;

  const lockEnded = released > 0 || (row.next_lock !== null && row.next_lock <= now);
  const { rows, failed } = lockEnded
    ? await takeExpired(tx, { max, accepted, groups, lockUntil, consumerId: request.consumerId })
    : { rows: [] as ClaimedRow[], failed: 0 };
  if (rows.length < max && classes.length > 0) {
    const want = max - rows.length;
    const ready =
      groups === null
        ? await lockReady(tx, classes, want, lockUntil, request.consumerId)
        : await lockReadyGrouped(tx, classes, want, lockUntil, request.consumerId, groups);
    ready.sort((a, b) => a.priority - b.priority || a.ready_at - b.ready_at || a.seq - b.seq);
    rows.push(...ready);
  }
  if (limit !== null && grant !== null && rows.length > 0) {
    await db.query(`UPDATE ${s}.queues SET rate_tat = $2 WHERE queue = $1`, [
      queue,
      rateCharge(limit, grant, rows.length),
    ]);
  }

  const charged = rates?.charged() ?? [];
  if (charged.length > 0) {
    await db.query(
      `INSERT INTO ${s}.group_rates (queue, group_name, tat) SELECT $1, u.g, u.t FROM unnest($2::text[], $3::float8[]) AS u(g, t)
       ON CONFLICT (queue, group_name) DO UPDATE SET tat = excluded.tat`,
      [queue, charged.map(([group]) => group), charged.map(([, tat]) => tat)],
    );
  }

  for (const r of rows) tx.event('started', r.id, r.attempt);
  const messages = rows.map((r) => claimedMessage(r, request.lockMs));
  const queueSize = row.size - failed;
  if (messages.length > 0) {
    if (row.dry_runs !== 0) {
      await db.query(`UPDATE ${s}.queues SET dry_runs = 0, eoq_until = 0 WHERE queue = $1`, [queue]);
    }
    return { messages, queueSize, dryRuns: 0, wakeAt: null };
  }
  // Only messages of groups over their rate waited: not a dry run; look again at the first group's next slot.
  if (rates !== null && rates.wakeAt !== Infinity) {
    return { messages, queueSize, dryRuns: row.dry_runs, wakeAt: rates.wakeAt };
  }
  return { messages, queueSize, ...(await dryRun(tx, request, classes)) };
}

/** What a claim's look at expired locks needs: how many it may take, which classes and groups, the new lock. */
interface ExpiredTake {
  readonly max: number;
  readonly accepted: ReadonlySet<string>;
  readonly groups: GroupLimit | null;
  readonly lockUntil: number;
  readonly consumerId: string;
}

/**
 * Messages whose lock ended (looked for only when the queue row's read says one has, or some were just freed):
 * each counts a lost delivery; at the queue's `maxDeliveries` it fails, else the claim takes it again if it
 * accepts its class and its group has a slot. Returns those taken and how many failed.
 */
async function takeExpired(tx: WriteContext, take: ExpiredTake): Promise<{ rows: ClaimedRow[]; failed: number }> {
  const { db, s, queue, now, config } = tx;
  const expired = await db.query<ExpiredRow>(
    `SELECT ${CLAIMED_FIELDS}, m.consumer, m.losses, m.history, m.group_name, m.parent_wait FROM ${s}.messages m
     WHERE m.queue = $1 AND m.phase = 1 AND m.lock_until <= $2 ORDER BY m.lock_until LIMIT $3
     FOR UPDATE SKIP LOCKED`,
    [queue, now, take.max],
  );
  const relock: { seq: number; losses: number; history: string }[] = [];
  let failed = 0;
  for (const lost of expired.rows) {
    const losses = lost.losses + 1;
    const history = historyWith(lost.history, {
      attempt: lost.attempt,
      startedAt: null,
      endedAt: now,
      consumer: lost.consumer,
      outcome: 'lost',
      error: null,
    });
    if (config.maxDeliveries > 0 && losses >= config.maxDeliveries) {
      await failMessage(tx, lost, maxDeliveriesError(losses), history);
      failed += 1;
    } else if (take.accepted.has(lost.filters) && takesGroupSlot(take.groups, lost.group_name)) {
      relock.push({ seq: lost.seq, losses, history });
    }
  }
  if (relock.length === 0) return { rows: [], failed };
  const relocked = await db.query<ClaimedRow>(
    `UPDATE ${s}.messages m SET lock_until = $1, consumer = $2, attempt = m.attempt + 1, updated_at = $3,
       losses = u.losses, history = u.history
     FROM unnest($4::bigint[], $5::integer[], $6::text[]) AS u(seq, losses, history)
     WHERE m.seq = u.seq
     RETURNING ${CLAIMED_FIELDS}`,
    [
      take.lockUntil,
      take.consumerId,
      now,
      relock.map((r) => r.seq),
      relock.map((r) => r.losses),
      relock.map((r) => r.history),
    ],
  );
  return { rows: relocked.rows, failed };
}

/**
 * The ready claim: $1 queue, $2 now, $3 the accepted classes, $4 the lock's end, $5 the consumer, $6 how many.
 * pick_ready (sql-functions.ts) takes them in claim order, one priority's ready range at a time; they are locked
 * by primary key and returned.
 */
export function lockReadySql(s: string): string {
  return `UPDATE ${s}.messages m SET phase = 1, lock_until = $4, consumer = $5, attempt = m.attempt + 1, requeue = 0,
       updated_at = $2
     WHERE m.seq = ANY((SELECT ${s}.pick_ready($1, $3::text[], $2::bigint, $6::integer))::bigint[])
     RETURNING ${CLAIMED_FIELDS}`;
}

/**
 * A page of candidates under a group limit: $1 queue, $2 now, $3 the accepted classes, $4 the groups full,
 * ($5, $6, $7) the (priority, ready_at, seq) of the last candidate seen, $8 how many. Each (class, priority)
 * range from that priority on (ranges.ts) gives its ready messages in ready order, never its delayed ones.
 */
export function readyCandidatesSql(s: string): string {
  return `${pendingRanges(s, '$3')}
    SELECT c.* FROM ranges r CROSS JOIN LATERAL (
      SELECT x.seq, x.priority, x.ready_at, x.group_name FROM ${s}.messages x
      WHERE x.queue = $1 AND x.filters = r.filters AND x.phase = 0 AND x.priority = r.priority AND x.ready_at <= $2
        AND (x.group_name IS NULL OR x.group_name <> ALL($4::text[]))
        AND (x.priority, x.ready_at, x.seq) > ($5, $6, $7)
      ORDER BY x.ready_at, x.seq LIMIT $8) c
    WHERE r.priority >= $5
    ORDER BY c.priority, c.ready_at, c.seq LIMIT $8`;
}

/** Locks up to `want` ready messages of the classes, lowest priority number first, then oldest. */
async function lockReady(
  tx: WriteContext,
  classes: readonly string[],
  want: number,
  lockUntil: number,
  consumer: string,
): Promise<ClaimedRow[]> {
  const { db, s, queue, now } = tx;
  const result = await db.query<ClaimedRow>(lockReadySql(s), [queue, now, classes, lockUntil, consumer, want]);
  return result.rows;
}

interface Candidate {
  readonly seq: number;
  readonly priority: number;
  readonly ready_at: number;
  readonly group_name: string | null;
}

/**
 * Under a group limit: candidates in claim order (groups full before the claim are skipped in SQL), each
 * taken one counting for its group, then the chosen ones locked. Claims of the queue take turns (its row is
 * locked), so the counts hold until the commit.
 */
async function lockReadyGrouped(
  tx: WriteContext,
  classes: readonly string[],
  want: number,
  lockUntil: number,
  consumer: string,
  groups: GroupLimit,
): Promise<ClaimedRow[]> {
  const { db, s, queue, now } = tx;
  const full = [...groups.held].filter(([, n]) => n >= groups.max).map(([group]) => group);
  const chosen: number[] = [];
  let after: Candidate = { seq: -1, priority: -1, ready_at: -1, group_name: null };
  for (;;) {
    const page = await db.query<Candidate>(readyCandidatesSql(s), [
      queue,
      now,
      classes,
      full,
      after.priority,
      after.ready_at,
      after.seq,
      CANDIDATE_PAGE,
    ]);
    for (const candidate of page.rows) {
      if (chosen.length >= want) break;
      if (takesGroupSlot(groups, candidate.group_name)) chosen.push(candidate.seq);
    }
    const last = page.rows.at(-1);
    if (chosen.length >= want || last === undefined || page.rows.length < CANDIDATE_PAGE) break;
    after = last;
  }
  if (chosen.length === 0) return [];
  const result = await db.query<ClaimedRow>(
    `UPDATE ${s}.messages m SET phase = 1, lock_until = $2, consumer = $3, attempt = m.attempt + 1, requeue = 0,
       updated_at = $4
     WHERE m.seq = ANY($1::bigint[]) AND m.phase = 0
     RETURNING ${CLAIMED_FIELDS}`,
    [chosen, lockUntil, consumer, now],
  );
  return result.rows;
}

/**
 * The queue's groups whose next start is still to come (claims take turns on the queue row meanwhile); a
 * group with no row, or one whose time has come, may start one now.
 */
async function groupRates(tx: WriteContext, limit: RateLimit): Promise<GroupRates> {
  const stored = await tx.db.query<{ group_name: string; tat: number }>(
    `SELECT group_name, tat FROM ${tx.s}.group_rates WHERE queue = $1 AND tat > $2`,
    [tx.queue, tx.now],
  );
  const tats = new Map(stored.rows.map((r) => [r.group_name, r.tat]));
  return new GroupRates(limit, tx.now, (group) => tats.get(group) ?? 0);
}

async function heldGroups(tx: WriteContext, max: number): Promise<GroupLimit> {
  const held = await tx.db.query<{ group_name: string; n: number }>(
    `SELECT group_name, count(*)::integer AS n FROM ${tx.s}.messages
     WHERE queue = $1 AND phase = 1 AND group_name IS NOT NULL AND lock_until > $2 GROUP BY group_name`,
    [tx.queue, tx.now],
  );
  return { max, held: new Map(held.rows.map((r) => [r.group_name, r.n])) };
}

/**
 * Nothing to take: count a dry run once per queue-wide end-of-queue backoff, and tell the worker when a
 * backoff or lock ends (one index seek per class and priority), so it looks again then even without a wake-up.
 */
async function dryRun(
  tx: WriteContext,
  request: ClaimRequest,
  classes: readonly string[],
): Promise<{ dryRuns: number; wakeAt: number }> {
  const { db, s, queue, now, row } = tx;
  let dryRuns = row.dry_runs;
  let eoqUntil = row.eoq_until;
  if (eoqUntil <= now) {
    dryRuns += 1;
    eoqUntil = now + request.eoqBackoffMs(dryRuns);
    await db.query(`UPDATE ${s}.queues SET dry_runs = $2, eoq_until = $3 WHERE queue = $1`, [queue, dryRuns, eoqUntil]);
  }
  const next = await db.query<{ ready: number | null; lock: number | null }>(nextTimesSql(s, '$2', '$3'), [
    queue,
    classes,
    now,
  ]);
  const { ready, lock } = next.rows[0] ?? { ready: null, lock: null };
  return { dryRuns, wakeAt: Math.min(eoqUntil, ready ?? Infinity, lock ?? Infinity) };
}
