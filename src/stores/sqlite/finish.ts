import { failMessage, historyWith, type WriteContext } from './failures.js';
import { childEnded } from './flows.js';
import { Phase } from './schema.js';
import { finishEventText } from '../contract/finish-event-text.js';
import type { ChunkedStatement } from './chunked.js';
import type { Finish, FinishResult } from '../contract/contract.js';
import type { QueueEventType } from '../../model/events.js';

/** A held message's row as a finish reads it (both SQL stores). */
export interface HeldRow {
  readonly seq: number;
  readonly id: string;
  readonly phase: number;
  readonly consumer: string | null;
  readonly attempt: number;
  readonly requeue: number;
  readonly filters: string;
  readonly history: string | null;
  /** 1 while a flow's parent waits for this message (sqlite/flows.ts). */
  readonly parent_wait: number;
}

/**
 * Records handler outcomes in one transaction (the caller's). Only the
 * consumer that holds the message, for the attempt it was handed, may finish
 * it: a late finish after the lock expired and another consumer took it is
 * `lost`. A message marked for requeue goes back to the queue with attempt 0
 * (after its backoff, if the outcome set one) and the replacement payload,
 * whatever the outcome. Otherwise an error fails the message at once (its
 * backoff ignored). An error or retry of a handler that ran adds a history record.
 * Each stored outcome is a queue event (completed, retrying, failed), but for a give-back.
 */
export function finishMessages(
  tx: WriteContext,
  bulk: BulkFinishes,
  consumerId: string,
  finishes: readonly Finish[],
): FinishResult[] {
  const { sql, queue, now } = tx;
  // Plain successes, the common case, go in multi-row updates, and so do successes with a result; the rest one
  // by one.
  const plain = finishes.filter(isPlainSuccess);
  const rows = plain.map((f) => [f.id, f.attempt]);
  const done = new Set(bulk.plain([now, queue, consumerId], rows) as string[]);
  for (const f of plain) if (done.has(f.id)) tx.event('completed', f.id, f.attempt);
  const kept = finishes.filter(isResultSuccess);
  if (kept.length > 0) {
    const keptRows = kept.map((f) => [f.id, f.attempt, ...resultValues(f)]);
    const keptDone = new Set(bulk.withResult([now, queue, consumerId], keptRows) as string[]);
    for (const f of kept) {
      if (!keptDone.has(f.id)) continue;
      done.add(f.id);
      tx.event('completed', f.id, f.attempt, finishEventText(f));
    }
  }
  let doneCount = done.size;

  const results: FinishResult[] = [];
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
    const history = finishHistory(row, f, consumerId, now);
    const common = { seq: row.seq, outcome: f.outcome, error: f.error, history, now };
    const event = finishEvent(row, f);
    if (event !== null) tx.event(event, f.id, f.attempt, finishEventText(f));
    if (f.outcome === 'retry') {
      sql.toPending.run({ ...common, readyAt: now + f.backoffMs, requeue: 0, resetAttempt: 0 });
      if (f.backoffMs === 0) tx.wake(queue);
    } else if (row.requeue === 1) {
      // With a backoff the requeued run waits in `done-with-requeue`.
      const waits = f.backoffMs > 0 ? 1 : 0;
      sql.toPending.run({ ...common, readyAt: now + f.backoffMs, requeue: waits, resetAttempt: 1 });
      if (waits === 0) tx.wake(queue);
    } else if (f.outcome === 'error') {
      failMessage(tx, row, f.error, history);
    } else {
      sql.toDone.run({ ...common, backoffUntil: f.backoffMs > 0 ? now + f.backoffMs : 0, ...resultColumns(f) });
      doneCount += 1;
      // A flow's child (never in the bulk updates above) counts for its parent in this transaction.
      if (row.parent_wait === 1) childEnded(tx, row.seq, false, null);
    }
    results.push('ok');
  }
  if (doneCount > 0) tx.count(-doneCount, doneCount);
  // A finish may free a full group's slot: idle workers hear of it instead of waiting for a backoff to end.
  if (tx.config().groupConcurrency !== null && results.includes('ok')) tx.wake(queue);
  return results;
}

/** The multi-row finishes: of plain successes, and of successes that keep a result (sqlite/chunked.ts). */
export interface BulkFinishes {
  readonly plain: ChunkedStatement;
  readonly withResult: ChunkedStatement;
}

/** A success with no backoff, error or result: the finish most messages end with, written in bulk. */
export function isPlainSuccess(f: Finish): boolean {
  return f.outcome === 'success' && f.backoffMs === 0 && f.error === null && f.result === undefined;
}

/** A success with a result and nothing else (no backoff, no error): written in bulk too, each with its result. */
export function isResultSuccess(f: Finish): boolean {
  return f.outcome === 'success' && f.backoffMs === 0 && f.error === null && f.result !== undefined;
}

function resultValues(f: Finish): [Uint8Array | null, number | null] {
  const { result, resultEncoding } = resultColumns(f);
  return [result, resultEncoding];
}

/** The result columns a finish to done writes (both SQL stores): NULL for none. */
export function resultColumns(f: Finish): { result: Uint8Array | null; resultEncoding: number | null } {
  const { result } = f;
  if (result === undefined) return { result: null, resultEncoding: null };
  return { result: result.bytes, resultEncoding: result.encoding === 'json' ? 0 : 1 };
}

/**
 * The history a finish stores (JSON), or null to keep it: an error or retry of a handler that ran adds a
 * record; a success or a give-back (startedAt null: it never ran) adds none. Shared with the PostgreSQL store.
 */
export function finishHistory(
  row: { readonly history: string | null; readonly attempt: number },
  f: Finish,
  consumerId: string,
  now: number,
): string | null {
  if (f.outcome === 'success' || f.startedAt === null) return null;
  return historyWith(row.history, {
    attempt: row.attempt,
    startedAt: f.startedAt,
    endedAt: now,
    consumer: consumerId,
    outcome: f.outcome,
    error: f.error,
  });
}

/**
 * The queue event a finish writes where the message is, or null: a failure without requeue writes its event
 * where the message goes (failMessage), and a give-back none. Shared with the PostgreSQL store.
 */
export function finishEvent(row: { readonly requeue: number }, f: Finish): QueueEventType | null {
  if (f.outcome === 'success') return 'completed';
  if (f.outcome === 'retry' && f.startedAt !== null) return 'retrying';
  if (f.outcome === 'error' && row.requeue === 1) return 'failed';
  return null;
}
