/**
 * The worker's steady state in one statement: its plain successes and its next claim, through the schema's
 * `finish_and_claim` (sql-finish-claim.ts), in one round trip and one commit. It runs on what the store read of
 * the queue last (its configuration and filter classes), which the function checks; anything it does not
 * cover answers null, and the caller does the same work as a transaction of the general statements; so does a
 * statement PostgreSQL rolled back as a deadlock's victim (transaction.ts).
 */
import type { Queryable } from './queryable.js';
import { KVMQ_FALLBACK } from './sql-finish-claim.js';
import { ROLLED_BACK_WHOLE } from './transaction.js';
import { quoteIdent } from './sql-text.js';
import { claimedMessage } from '../sqlite/claim.js';
import type { ClaimRequest, ClaimResult, Finish, FinishResult } from '../contract/contract.js';
import { eoqSteps } from '../contract/eoq-steps.js';
import type { QueueConfig } from '../../model/types.js';

/** What the store read of a queue last. */
export interface KnownQueue {
  /** The configuration's JSON as stored (null: the defaults), and parsed. */
  readonly json: string | null;
  readonly config: QueueConfig;
  readonly classes: readonly string[];
}

/** A claimed message's row. */
interface Row {
  readonly r_seq: number;
  readonly r_id: string;
  readonly r_payload: Buffer;
  readonly r_encoding: number;
  readonly r_metadata: string;
  readonly r_filters: string;
  readonly r_attempt: number;
  readonly r_policy: string | null;
  readonly r_priority: number;
  readonly r_ready_at: number;
  readonly r_size: number;
}

/** The row that ends a claim short of its max: no message (r_seq null), when to look again, the dry runs. */
interface LookAgain {
  readonly r_seq: null;
  readonly r_size: number;
  readonly r_wake_at: number;
  readonly r_dry_runs: number;
}

/**
 * Whether the statement may do this work: plain successes, and a claim with no limit to take turns on. Under a
 * group limit a finish also wakes idle workers (a slot freed), which the general finish does.
 */
export function coversWork(known: KnownQueue, finishes: readonly Finish[], claim: ClaimRequest | null): boolean {
  const { config } = known;
  if (config.groupConcurrency !== null || config.groupRateLimit !== null) return false;
  if (claim !== null && (config.paused || config.rateLimit !== null)) return false;
  // A result is written by the general finish (finish.ts), in the same transaction as its outcome.
  return finishes.every(
    (f) => f.outcome === 'success' && f.backoffMs === 0 && f.error === null && f.result === undefined,
  );
}

/** Null when the general path must run instead (nothing of it was stored); `claimed` null when `claim` is. */
export async function finishAndClaim(
  db: Queryable,
  schema: string,
  queue: string,
  consumerId: string,
  known: KnownQueue,
  finishes: readonly Finish[],
  claim: ClaimRequest | null,
): Promise<{ results: FinishResult[]; claimed: ClaimResult | null } | null> {
  const now = Date.now();
  const accepts = claim?.accepts ?? null;
  let rows: (Row | LookAgain)[];
  try {
    const result = await db.query<Row | LookAgain>(
      `SELECT * FROM ${quoteIdent(schema)}.finish_and_claim($1, $2, $3, $4, $5, $6::text[], $7::integer[],
         $8::text[], $9::text[], $10, $11, $12::bigint[])`,
      [
        queue,
        now,
        consumerId,
        known.json,
        known.config.events,
        finishes.map((f) => f.id),
        finishes.map((f) => f.attempt),
        known.classes,
        accepts === null ? null : known.classes.filter((c) => accepts(c)),
        claim?.max ?? 0,
        now + (claim?.lockMs ?? 0),
        claim === null ? [] : eoqSteps(claim),
      ],
    );
    rows = result.rows;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    // A deadlock's victim applied nothing: the general path runs the work again, as its transactions do.
    if (code === KVMQ_FALLBACK || ROLLED_BACK_WHOLE.has(code)) return null;
    throw error;
  }
  const results = finishes.map((): FinishResult => 'ok');
  if (claim === null) return { results, claimed: null };
  const said = rows.find((r): r is LookAgain => r.r_seq === null);
  const taken = rows.filter((r): r is Row => r.r_seq !== null);
  taken.sort((a, b) => a.r_priority - b.r_priority || a.r_ready_at - b.r_ready_at || a.r_seq - b.r_seq);
  const messages = taken.map((r) =>
    claimedMessage(
      {
        id: r.r_id,
        payload: r.r_payload,
        encoding: r.r_encoding,
        metadata: r.r_metadata,
        filters: r.r_filters,
        attempt: r.r_attempt,
        policy: r.r_policy,
      },
      claim.lockMs,
    ),
  );
  return {
    results,
    claimed: {
      messages,
      queueSize: (said ?? taken[0])?.r_size ?? 0,
      dryRuns: said?.r_dry_runs ?? 0,
      wakeAt: said?.r_wake_at ?? null,
    },
  };
}
