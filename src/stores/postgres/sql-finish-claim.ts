/**
 * `finish_and_claim`: a consumer's plain successes and its next claim in one statement, so the worker's steady
 * state is one round trip and one commit per batch (finish-claim.ts). It covers the common case only and raises
 * KVMQ_FALLBACK, undoing all of it, when anything else applies: the queue's configuration or filter classes
 * differ from what the caller read last, a lock has ended (lost deliveries count, and may fail a message), or a
 * finish is not a held attempt's plain success (a requeue, a lost lock). The caller then runs the same work as
 * a transaction of the store's general statements.
 *
 * A claim that takes fewer messages than asked took every ready one: it ends with a row without a message that
 * says when looking again is worthwhile without a wake-up, as the general claim's dry run does (claim.ts). One
 * that takes none counts that dry run, in the same statement.
 */
import { QUEUE_EVENT_TYPES } from '../../model/events.js';
import { nextTimesSql } from './ranges.js';
import { GENERIC_PLANS, heldAttemptSql, quoteIdent } from './sql-text.js';

/** The SQLSTATE `finish_and_claim` raises when its caller must take the general path. */
export const KVMQ_FALLBACK = 'KQ001';

const COMPLETED = QUEUE_EVENT_TYPES.indexOf('completed');
const STARTED = QUEUE_EVENT_TYPES.indexOf('started');

export function finishClaimDdl(schema: string): string {
  const s = quoteIdent(schema);
  return `
-- p_config: the queue's configuration JSON as the caller read it; p_classes: its filter classes as the caller
-- knows them, p_accepted those the consumer takes (NULL: every class); p_max 0 claims nothing. p_eoq: the
-- end-of-queue backoffs after 1 to 5 dry runs in a row; none: a claim short of p_max ends with no row of when
-- to look again, and one that takes nothing counts no dry run (the caller's general claim does).
CREATE OR REPLACE FUNCTION ${s}.finish_and_claim(p_queue text, p_now bigint, p_consumer text, p_config text, p_events boolean,
    p_ids text[], p_attempts integer[], p_classes text[], p_accepted text[], p_max integer, p_lock_until bigint,
    p_eoq bigint[])
    RETURNS TABLE (r_seq bigint, r_id text, r_payload bytea, r_encoding smallint, r_metadata text, r_filters text,
      r_attempt integer, r_policy text, r_priority integer, r_ready_at bigint, r_size bigint, r_wake_at bigint,
      r_dry_runs integer)
    LANGUAGE plpgsql ${GENERIC_PLANS} AS $fn$
DECLARE
  n integer := coalesce(array_length(p_ids, 1), 0);
  q record;
  got record;
  size_now bigint;
  picked bigint[];
  claimed integer := 0;
  removed integer := 0;
  e_types smallint[] := '{}';
  e_ids text[] := '{}';
  e_attempts integer[] := '{}';
  next_ready bigint;
  next_lock bigint;
  eoq_end bigint;
BEGIN
  SELECT x.config, x.dry_runs, x.eoq_until INTO q FROM ${s}.queues x WHERE x.queue = p_queue;
  IF NOT FOUND OR q.config IS DISTINCT FROM p_config
    OR EXISTS (SELECT 1 FROM ${s}.classes c WHERE c.queue = p_queue AND c.filters <> ALL(p_classes))
    OR EXISTS (SELECT 1 FROM ${s}.messages x WHERE x.queue = p_queue AND x.phase = 1 AND x.lock_until <= p_now) THEN
    RAISE EXCEPTION 'kvmq: finish_and_claim needs the general path' USING ERRCODE = '${KVMQ_FALLBACK}';
  END IF;
  IF n > 0 THEN
${finishSql(s)}
    -- One was not held as sent, or marked for requeue, or a flow's child owing its parent a count (flows.ts) or,
    -- on a queue that keeps no successes, any flow's child, or an id came twice.
    IF claimed <> n THEN
      RAISE EXCEPTION 'kvmq: finish_and_claim needs the general path' USING ERRCODE = '${KVMQ_FALLBACK}';
    END IF;
    claimed := 0;
    IF p_events THEN
      e_types := array_fill(${COMPLETED}::smallint, ARRAY[n]);
      e_ids := p_ids;
      e_attempts := p_attempts;
    END IF;
  END IF;
  IF p_max > 0 THEN
    SELECT coalesce(sum(c.size), 0) - n INTO size_now FROM ${s}.counts c WHERE c.queue = p_queue;
    -- The picks (pick_ready), then their update by primary key: a generic plan cannot know how many a claim
    -- takes, and joining them in one statement, once ANALYZE had seen a large backlog, it hashed a scan of
    -- every message.
    picked := ${s}.pick_ready(p_queue, coalesce(p_accepted, p_classes), p_now, p_max);
    -- Rows (and their started events) in claim order, as the picks were made.
    FOR got IN
      WITH locked AS (
        UPDATE ${s}.messages x SET phase = 1, lock_until = p_lock_until, consumer = p_consumer,
            attempt = x.attempt + 1, requeue = 0, updated_at = p_now
          WHERE x.seq = ANY(picked)
          RETURNING x.seq, x.id, x.payload, x.encoding, x.metadata, x.filters, x.attempt, x.policy, x.priority,
            x.ready_at)
      SELECT * FROM locked ORDER BY locked.priority, locked.ready_at, locked.seq
    LOOP
      claimed := claimed + 1;
      r_seq := got.seq; r_id := got.id; r_payload := got.payload; r_encoding := got.encoding;
      r_metadata := got.metadata; r_filters := got.filters; r_attempt := got.attempt; r_policy := got.policy;
      r_priority := got.priority; r_ready_at := got.ready_at; r_size := size_now;
      RETURN NEXT;
      IF p_events THEN
        e_types := e_types || ${STARTED}::smallint;
        e_ids := e_ids || got.id;
        e_attempts := e_attempts || got.attempt;
      END IF;
    END LOOP;
  END IF;
  -- The queue row (events, dry runs) before the counter slot: the order every transaction takes them in.
  IF cardinality(e_ids) > 0 THEN
    PERFORM ${s}.add_events(p_queue, p_now, e_types, e_ids, e_attempts,
      array_fill(NULL::text, ARRAY[cardinality(e_ids)]));
  END IF;
  IF claimed > 0 AND q.dry_runs <> 0 THEN
    UPDATE ${s}.queues SET dry_runs = 0, eoq_until = 0 WHERE queue = p_queue;
  END IF;
${lookAgainSql(s)}
  IF n > 0 THEN
    PERFORM ${s}.add_counts(p_queue, -n, n - removed, 0);
  END IF;
END
$fn$;

${olderFormDdl(s)}`;
}

/**
 * The finishes: plain successes of messages p_consumer holds, stored; on a queue that keeps no successes
 * (keepDone 0) removed instead, not at its next GC (one row version and its index entries fewer), but for a
 * flow's child, which its parent reads (the general path keeps it). `claimed` counts them. Each statement is
 * planned with the batch's values (EXECUTE), not kept generic (GENERIC_PLANS): a generic plan guesses ten
 * finishes and, for a worker finishing a thousand, compared each with every message the consumer held.
 */
function finishSql(s: string): string {
  const held = `${heldAttemptSql('x', '$1', '$4')} AND x.requeue = 0 AND x.parent_wait = 0`;
  return `    IF (q.config::jsonb ->> 'keepDone') = '0' THEN
      EXECUTE $q$DELETE FROM ${s}.messages x USING unnest($2, $3) AS u(id, attempt)
        WHERE ${held} AND x.parent_seq IS NULL$q$ USING p_queue, p_ids, p_attempts, p_consumer;
      GET DIAGNOSTICS removed = ROW_COUNT;
      claimed := removed;
    ELSE
      EXECUTE $q$UPDATE ${s}.messages x SET phase = 2, lock_until = 0, consumer = NULL, backoff_until = 0,
          outcome = 'success', last_error = NULL, updated_at = $5
        FROM unnest($2, $3) AS u(id, attempt) WHERE ${held}$q$ USING p_queue, p_ids, p_attempts, p_consumer, p_now;
      GET DIAGNOSTICS claimed = ROW_COUNT;
    END IF;`;
}

/**
 * A claim short of p_max took every ready message: its last row says when looking again is worthwhile without a
 * wake-up, as the general claim's dry run does (claim.ts); one that took none counts that dry run.
 */
function lookAgainSql(s: string): string {
  return `  IF p_max > 0 AND claimed < p_max AND cardinality(p_eoq) > 0 THEN
    -- Every ready message was taken. $1 in the query is p_queue.
    SELECT t.ready, t.lock INTO next_ready, next_lock
      FROM (${nextTimesSql(s, 'coalesce(p_accepted, p_classes)', 'p_now')}) t;
    r_dry_runs := q.dry_runs;
    eoq_end := q.eoq_until;
    IF claimed > 0 THEN
      -- Not a dry run: look again when the first one would end.
      r_dry_runs := 0;
      eoq_end := p_now + p_eoq[1];
    ELSIF eoq_end <= p_now THEN
      -- A dry run, counted once per queue-wide end-of-queue backoff.
      r_dry_runs := q.dry_runs + 1;
      eoq_end := p_now + p_eoq[least(r_dry_runs, cardinality(p_eoq))];
      UPDATE ${s}.queues SET dry_runs = r_dry_runs, eoq_until = eoq_end WHERE queue = p_queue;
    END IF;
    r_seq := NULL; r_id := NULL; r_payload := NULL; r_encoding := NULL; r_metadata := NULL; r_filters := NULL;
    r_attempt := NULL; r_policy := NULL; r_priority := NULL; r_ready_at := NULL;
    r_size := size_now; r_wake_at := least(eoq_end, next_ready, next_lock);
    RETURN NEXT;
  END IF;`;
}

/**
 * The form kvmq before schema 8 calls, on the statement as this kvmq writes it: a process of that kvmq still
 * running keeps working until it restarts (and is refused then). Its claims short of p_max end with no row of
 * when to look again: its general claim records the dry run.
 */
function olderFormDdl(s: string): string {
  return `CREATE OR REPLACE FUNCTION ${s}.finish_and_claim(p_queue text, p_now bigint, p_consumer text, p_config text, p_events boolean,
    p_ids text[], p_attempts integer[], p_classes text[], p_accepted text[], p_max integer, p_lock_until bigint)
    RETURNS TABLE (r_seq bigint, r_id text, r_payload bytea, r_encoding smallint, r_metadata text, r_filters text,
      r_attempt integer, r_policy text, r_priority integer, r_ready_at bigint, r_size bigint)
    LANGUAGE sql AS $fn$
  SELECT f.r_seq, f.r_id, f.r_payload, f.r_encoding, f.r_metadata, f.r_filters, f.r_attempt, f.r_policy, f.r_priority,
      f.r_ready_at, f.r_size
    FROM ${s}.finish_and_claim(p_queue, p_now, p_consumer, p_config, p_events, p_ids, p_attempts, p_classes, p_accepted,
      p_max, p_lock_until, '{}'::bigint[]) f
$fn$;
`;
}
