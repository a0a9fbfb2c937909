import { failMessage } from './failures.js';
import { childrenSucceeded } from './flows.js';
import { heldAttemptSql } from './sql-text.js';
// The rules of a finish are SQLite's: one statement of them for both stores.
import {
  bulkStored,
  finishEvent,
  finishHistory,
  finishStep,
  heldFor,
  leftToFinish,
  isPlainSuccess,
  isResultSuccess,
  resultColumns,
  type HeldRow,
} from '../sqlite/finish.js';
import { finishEventText } from '../contract/finish-event-text.js';
import type { WriteContext } from './tx.js';
import type { Finish, FinishResult } from '../contract/contract.js';

/**
 * Records handler outcomes in one transaction (the caller's). Only the consumer that holds the message, for
 * the attempt it was handed, may finish it: a late finish after the lock ended and another consumer took it
 * is `lost`. Plain successes, the common case, are one statement for the whole batch, and so are successes with
 * a result; the rest one by one, with the rules of the SQLite store (src/stores/sqlite/finish.ts): a message marked for requeue goes
 * back with attempt 0 whatever the outcome, an error fails it, a retry waits its backoff, and each stored outcome is a
 * queue event but for a give-back. The flow children that succeeded, in bulk or not, then count for their parents
 * in one more statement (flows.ts).
 */
export async function finishMessages(
  tx: WriteContext,
  consumerId: string,
  finishes: readonly Finish[],
): Promise<FinishResult[]> {
  const { db, s, queue, now } = tx;
  const plain = finishes.filter(isPlainSuccess);
  const done = new Set<string>();
  // The flow children that succeeded: they count for their parents together, at the end.
  const children: number[] = [];
  const storedInBulk = (bulk: readonly Finish[], rows: readonly BulkRow[]): void => {
    bulkStored(
      tx,
      bulk,
      rows.map((r) => r.id),
      done,
    );
    for (const r of rows) if (r.parent_wait === 1) children.push(r.seq);
  };
  const removed = await removePlain(tx, consumerId, plain);
  storedInBulk(plain, removed);
  const plainLeft = plain.filter((f) => !done.has(f.id));
  if (plainLeft.length > 0) {
    const updated = await db.query<BulkRow>(
      `UPDATE ${s}.messages m SET phase = 2, lock_until = 0, consumer = NULL, backoff_until = 0, outcome = 'success',
         last_error = NULL, updated_at = $1
       FROM unnest($4::text[], $5::integer[]) AS u(id, attempt)
       WHERE ${held('$2', '$3')}
       RETURNING m.id, m.seq, m.parent_wait`,
      [now, queue, consumerId, plainLeft.map((f) => f.id), plainLeft.map((f) => f.attempt)],
    );
    storedInBulk(plainLeft, updated.rows);
  }
  // Successes with a result, in one statement too, each row given its own.
  const kept = finishes.filter(isResultSuccess);
  if (kept.length > 0) {
    const columns = kept.map(resultColumns);
    const updated = await db.query<BulkRow>(
      `UPDATE ${s}.messages m SET phase = 2, lock_until = 0, consumer = NULL, backoff_until = 0, outcome = 'success',
         last_error = NULL, updated_at = $1, result = u.result, result_encoding = u.encoding
       FROM unnest($4::text[], $5::integer[], $6::bytea[], $7::smallint[]) AS u(id, attempt, result, encoding)
       WHERE ${held('$2', '$3')}
       RETURNING m.id, m.seq, m.parent_wait`,
      [
        now,
        queue,
        consumerId,
        kept.map((f) => f.id),
        kept.map((f) => f.attempt),
        // As Buffers: node-postgres writes those in an array as bytea.
        columns.map((c) =>
          c.result === null ? null : Buffer.from(c.result.buffer, c.result.byteOffset, c.result.byteLength),
        ),
        columns.map((c) => c.resultEncoding),
      ],
    );
    storedInBulk(kept, updated.rows);
  }
  let doneCount = done.size;

  const results: FinishResult[] = [];
  for (const f of leftToFinish(finishes, done, results)) {
    const held = await db.query<HeldRow>(
      `SELECT seq, id, phase, consumer, attempt, requeue, filters, history, parent_wait FROM ${s}.messages
       WHERE queue = $1 AND id = $2 FOR UPDATE`,
      [queue, f.id],
    );
    const row = held.rows[0];
    if (!heldFor(row, consumerId, f)) {
      results.push('lost');
      continue;
    }
    const history = finishHistory(row, f, consumerId, now);
    const event = finishEvent(row, f);
    if (event !== null) tx.event(event, f.id, f.attempt, finishEventText(f));
    const step = finishStep(row, f, now);
    if (step.to === 'pending') {
      await toPending(tx, row.seq, f, history, step.readyAt, step.requeue, step.resetAttempt);
      if (step.wake) tx.wake();
    } else if (step.to === 'failed') {
      await failMessage(tx, row, f.error, history);
    } else {
      const { result, resultEncoding } = resultColumns(f);
      await db.query(
        `UPDATE ${s}.messages SET phase = 2, lock_until = 0, consumer = NULL, backoff_until = $2, outcome = $3,
           last_error = $4, updated_at = $5, result = $6, result_encoding = $7
         WHERE seq = $1`,
        [row.seq, step.backoffUntil, f.outcome, f.error, now, result, resultEncoding],
      );
      doneCount += 1;
      if (row.parent_wait === 1) children.push(row.seq);
    }
    results.push('ok');
  }
  await childrenSucceeded(tx, children);
  if (doneCount > 0) tx.count(-doneCount, doneCount - removed.length, 0);
  // A finish may free a full group's slot: idle workers hear of it instead of waiting for a backoff to end.
  if (tx.config.groupConcurrency !== null && results.includes('ok')) tx.wake();
  return results;
}

/**
 * On a queue that keeps no successes (keepDone 0), the plain successes are removed now, as finish_and_claim
 * removes them; a flow's child is kept, for its parent to read (job.children()) and to count for it, and GC
 * removes it.
 */
async function removePlain(tx: WriteContext, consumerId: string, plain: readonly Finish[]): Promise<BulkRow[]> {
  if (plain.length === 0 || tx.config.keepDone !== 0) return [];
  const deleted = await tx.db.query<BulkRow>(
    `DELETE FROM ${tx.s}.messages m USING unnest($3::text[], $4::integer[]) AS u(id, attempt)
     WHERE ${held('$1', '$2')} AND m.parent_seq IS NULL
     RETURNING m.id, m.seq, m.parent_wait`,
    [tx.queue, consumerId, plain.map((f) => f.id), plain.map((f) => f.attempt)],
  );
  return deleted.rows;
}

/** Rows `m` of the batch `u` held for that attempt by the consumer, not marked for requeue (both placeholders). */
function held(queue: string, consumer: string): string {
  return `${heldAttemptSql('m', queue, consumer)} AND m.requeue = 0`;
}

/** Back to pending: a retry (attempt kept) or a requeued run (attempt 0, the replacement payload). */
async function toPending(
  tx: WriteContext,
  seq: number,
  f: Finish,
  history: string | null,
  readyAt: number,
  requeue: number,
  resetAttempt: boolean,
): Promise<void> {
  await tx.db.query(
    `UPDATE ${tx.s}.messages SET phase = 0, ready_at = $2, lock_until = 0, consumer = NULL, requeue = $3,
       attempt = CASE WHEN $4 THEN 0 ELSE attempt END, losses = CASE WHEN $4 THEN 0 ELSE losses END,
       history = coalesce($5, history),
       payload = coalesce(next_payload, payload), encoding = coalesce(next_encoding, encoding),
       next_payload = NULL, next_encoding = NULL, outcome = $6, last_error = $7, updated_at = $8,
       result = NULL, result_encoding = NULL
     WHERE seq = $1`,
    [seq, readyAt, requeue, resetAttempt, history, f.outcome, f.error, tx.now],
  );
}

/** A row a bulk success updated: its id, and its seq and whether it owes a flow parent a count. */
interface BulkRow {
  readonly id: string;
  readonly seq: number;
  readonly parent_wait: number;
}
