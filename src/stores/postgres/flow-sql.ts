/**
 * The statements of flows on PostgreSQL (flows.ts), each a function of the quoted schema. A child's end is
 * counted by one statement (childrenSucceededSql for successes, together; childFailsSql for a failure): the
 * child's debt cleared and the parent's count taken, its row locked by that UPDATE, in the transaction of the end.
 */
import { CHILD_FAILURE } from '../sqlite/flows.js';
import { quoteLiteral } from './sql-text.js';
import { STATUS_FIELDS } from './inspect.js';

/**
 * A flow's messages in one statement, parents first: $1 queues, $2 ids, $3 payloads, $4 encodings, $5 metadata,
 * $6 filter classes, $7 delays, $8 policies, $9 priorities, $10 groups, $11 each one's parent (its index in
 * the arrays, from 0; NULL for the root), $12 how many children it waits for, $13 its child_failure, $14 now.
 * Each takes its seq from the table's sequence first, so a child names its parent's in the same insert; the
 * queue rows and filter classes go in with it. Returns the (queue, id) of each row written: one missing was
 * refused, its id taken.
 */
export function flowInsertSql(s: string): string {
  const seqSequence = `pg_get_serial_sequence(${quoteLiteral(`${s}.messages`)}, 'seq')`;
  return `WITH q AS (INSERT INTO ${s}.queues (queue) SELECT DISTINCT unnest($1::text[]) ON CONFLICT DO NOTHING),
     c AS (INSERT INTO ${s}.classes (queue, filters) SELECT DISTINCT x.q, x.f FROM unnest($1::text[], $6::text[]) AS x(q, f)
       ON CONFLICT DO NOTHING),
     u AS (SELECT u.*, nextval(${seqSequence}) AS seq
       FROM unnest($1::text[], $2::text[], $3::bytea[], $4::smallint[], $5::text[], $6::text[], $7::bigint[],
         $8::text[], $9::integer[], $10::text[], $11::integer[], $12::integer[], $13::smallint[])
         WITH ORDINALITY AS u(q, i, p, e, m, f, d, po, pr, g, par, ch, cf, ord))
   INSERT INTO ${s}.messages (seq, queue, id, payload, encoding, metadata, filters, phase, ready_at, enqueued_at,
       updated_at, policy, priority, group_name, parent_seq, parent_wait, child_failure, children_left)
     OVERRIDING SYSTEM VALUE
     SELECT u.seq, u.q, u.i, u.p, u.e, u.m, u.f, CASE WHEN u.ch > 0 THEN 4 ELSE 0 END, $14 + u.d, $14, $14, u.po,
       u.pr, u.g, pu.seq, CASE WHEN u.par IS NULL THEN 0 ELSE 1 END, u.cf, u.ch
     FROM u LEFT JOIN u pu ON pu.ord = u.par + 1
     ORDER BY u.ord
   ON CONFLICT (queue, id) DO NOTHING
   RETURNING queue, id`;
}

/**
 * The messages a flow depends on ($1 queues, $2 ids), locked until the flow commits: an end that raced the flow
 * either committed first (this read sees it) or waits for the flow and then finds the link. In seq order, so
 * two flows naming the same messages lock them in one order.
 */
export function lockDependenciesSql(s: string): string {
  return `SELECT m.seq, m.queue, m.id, m.phase, m.ready_at, m.lock_until, m.backoff_until, m.requeue, m.parent_seq
     FROM ${s}.messages m JOIN unnest($1::text[], $2::text[]) AS d(q, i) ON m.queue = d.q AND m.id = d.i
     ORDER BY m.seq FOR UPDATE OF m`;
}

/**
 * Links the dependencies as children ($1 their seqs; $2, $3 each one's parent's queue and id, written by the
 * flow; $4 whether it owes the parent a count; $5 its child_failure).
 */
export function linkDependenciesSql(s: string): string {
  return `UPDATE ${s}.messages m SET parent_seq = p.seq, parent_wait = l.w, child_failure = l.cf
     FROM unnest($1::bigint[], $2::text[], $3::text[], $4::smallint[], $5::smallint[]) AS l(seq, pq, pi, w, cf)
       JOIN ${s}.messages p ON p.queue = l.pq AND p.id = l.pi
     WHERE m.seq = l.seq`;
}

/**
 * A child's final failure ($1 its seq, $2 now): its debt cleared (parent_wait 1 → 0, so it is counted once); when
 * its parent waits and its policy ignores the failure, the parent's children_left goes down, and at 0 the parent
 * is pending (phase 0, at its own ready time). Returns the link (none: the child owed nothing) and the parent's
 * phase after (NULL: not counted here, its policy is to be applied).
 */
export function childFailsSql(s: string): string {
  return `WITH c AS (
       UPDATE ${s}.messages SET parent_wait = 0 WHERE seq = $1 AND parent_wait = 1
       RETURNING parent_seq, child_failure, queue, id),
     p AS (
       UPDATE ${s}.messages m SET children_left = m.children_left - 1,
         phase = CASE WHEN m.children_left <= 1 THEN 0 ELSE 4 END,
         updated_at = CASE WHEN m.children_left <= 1 THEN $2 ELSE m.updated_at END
       FROM c WHERE m.seq = c.parent_seq AND m.phase = 4 AND c.child_failure = ${CHILD_FAILURE.ignore}
       RETURNING m.phase, m.queue, m.ready_at)
   SELECT c.parent_seq, c.child_failure, c.queue, c.id, p.phase AS parent_phase, p.queue AS parent_queue,
     p.ready_at AS parent_ready_at
   FROM c LEFT JOIN p ON true`;
}

/**
 * Children that succeeded together ($1 their seqs, $2 now), in the transaction that stored their successes: each
 * one's debt cleared once, and each waiting parent's children_left taken down by how many of its own ended here,
 * pending (phase 0, at its own ready time) at 0. Returns the parents counted: their phase after, queue and
 * ready time.
 */
export function childrenSucceededSql(s: string): string {
  return `WITH c AS (
       UPDATE ${s}.messages SET parent_wait = 0 WHERE seq = ANY($1::bigint[]) AND parent_wait = 1
       RETURNING parent_seq),
     n AS (SELECT parent_seq, count(*)::integer AS k FROM c GROUP BY parent_seq)
   UPDATE ${s}.messages m SET children_left = m.children_left - n.k,
       phase = CASE WHEN m.children_left <= n.k THEN 0 ELSE 4 END,
       updated_at = CASE WHEN m.children_left <= n.k THEN $2 ELSE m.updated_at END
     FROM n WHERE m.seq = n.parent_seq AND m.phase = 4
     RETURNING m.phase, m.queue, m.ready_at`;
}

/** The columns of a parent (or a child not started) as flows.ts reads them. */
export const FLOW_ROW_FIELDS = 'seq, queue, id, phase, attempt, filters, history, parent_wait';

/** $1 a waiting parent's seq: its row, locked; none when it no longer waits. */
export function waitingParentSql(s: string): string {
  return `SELECT ${FLOW_ROW_FIELDS} FROM ${s}.messages WHERE seq = $1 AND phase = 4 FOR UPDATE`;
}

/** $1 a parent's seq: its children that have not started (pending, or waiting themselves) and owe it, locked. */
export function childrenNotStartedSql(s: string): string {
  return `SELECT ${FLOW_ROW_FIELDS} FROM ${s}.messages
     WHERE parent_seq = $1 AND parent_wait = 1 AND phase IN (0, 4) ORDER BY seq FOR UPDATE`;
}

/** $1 a parent's seq: deletes its children not started that owe it, returning them. */
export function removeChildrenSql(s: string): string {
  return `DELETE FROM ${s}.messages WHERE parent_seq = $1 AND parent_wait = 1 AND phase IN (0, 4)
     RETURNING ${FLOW_ROW_FIELDS}`;
}

/** $1 seq, $2 error, $3 now: a waiting parent fails in place (it never ran: no dead-letter move). */
export function failParentSql(s: string): string {
  return `UPDATE ${s}.messages SET phase = 3, children_left = 0, outcome = 'error', last_error = $2, updated_at = $3
     WHERE seq = $1`;
}

/**
 * Children retried ($1 their seqs, $2 their parents' seqs, one a child): each whose parent still waits owes it a
 * count again, the parent's count going up by as many, its row locked by the UPDATE.
 */
export function childrenRetriedSql(s: string): string {
  return `WITH r AS (SELECT * FROM unnest($1::bigint[], $2::bigint[]) AS r(seq, parent)),
     k AS (SELECT parent, count(*) AS n FROM r GROUP BY parent),
     p AS (UPDATE ${s}.messages m SET children_left = m.children_left + k.n FROM k
       WHERE m.seq = k.parent AND m.phase = 4 RETURNING m.seq)
   UPDATE ${s}.messages m SET parent_wait = 1 FROM r JOIN p ON p.seq = r.parent WHERE m.seq = r.seq`;
}

/**
 * The tree of the flow the message ($1 queue, $2 id) belongs to: up to its topmost ancestor still stored, then
 * every node under it, each with its parent's seq, in the order written.
 */
export function flowTreeSql(s: string): string {
  return `WITH RECURSIVE up AS (
       SELECT seq, parent_seq, 0 AS depth FROM ${s}.messages WHERE queue = $1 AND id = $2
       UNION ALL
       SELECT m.seq, m.parent_seq, up.depth + 1 FROM ${s}.messages m JOIN up ON m.seq = up.parent_seq),
     top AS (SELECT seq FROM up ORDER BY depth DESC LIMIT 1),
     down AS (
       SELECT seq FROM top
       UNION ALL
       SELECT m.seq FROM ${s}.messages m JOIN down ON m.parent_seq = down.seq)
   SELECT ${STATUS_FIELDS}, result, result_encoding, queue, parent_seq, seq = (SELECT seq FROM top) AS top
   FROM ${s}.messages WHERE seq IN (SELECT seq FROM down) ORDER BY seq`;
}

/** $1 queue, $2 id: the message's children, in the order written. */
export function flowChildrenSql(s: string): string {
  return `SELECT ${STATUS_FIELDS}, result, result_encoding, queue FROM ${s}.messages
     WHERE parent_seq = (SELECT seq FROM ${s}.messages WHERE queue = $1 AND id = $2) ORDER BY seq`;
}
