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
  const done = new Set<string>();
  const plain = finishes.filter(isPlainSuccess);
  const rows = plain.map((f) => [f.id, f.attempt]);
  // A queue that keeps no successes (keepDone 0) has them removed now rather than at its next GC.
  const removing = tx.config().keepDone === 0;
  const stored = (
    removing ? bulk.removePlain([queue, consumerId], rows) : bulk.plain([now, queue, consumerId], rows)
  ) as string[];
  bulkStored(tx, plain, stored, done);
  const removed = removing ? stored.length : 0;
  const kept = finishes.filter(isResultSuccess);
  if (kept.length > 0) {
    const keptRows = kept.map((f) => [f.id, f.attempt, ...resultValues(f)]);
    bulkStored(tx, kept, bulk.withResult([now, queue, consumerId], keptRows) as string[], done);
  }
  let doneCount = done.size;

  const results: FinishResult[] = [];
  for (const f of leftToFinish(finishes, done, results)) {
    const row = sql.held.get(queue, f.id) as HeldRow | undefined;
    if (!heldFor(row, consumerId, f)) {
      results.push('lost');
      continue;
    }
    const history = finishHistory(row, f, consumerId, now);
    const common = { seq: row.seq, outcome: f.outcome, error: f.error, history, now };
    const event = finishEvent(row, f);
    if (event !== null) tx.event(event, f.id, f.attempt, finishEventText(f));
    const step = finishStep(row, f, now);
    if (step.to === 'pending') {
      const { readyAt, requeue } = step;
      sql.toPending.run({ ...common, readyAt, requeue, resetAttempt: step.resetAttempt ? 1 : 0 });
      if (step.wake) tx.wake(queue);
    } else if (step.to === 'failed') {
      failMessage(tx, row, f.error, history);
    } else {
      sql.toDone.run({ ...common, backoffUntil: step.backoffUntil, ...resultColumns(f) });
      doneCount += 1;
      // A flow's child (never in the bulk updates above) counts for its parent in this transaction.
      if (row.parent_wait === 1) childEnded(tx, row.seq, false, null);
    }
    results.push('ok');
  }
  if (doneCount > 0) tx.count(-doneCount, doneCount - removed);
  // A finish may free a full group's slot: idle workers hear of it instead of waiting for a backoff to end.
  if (tx.config().groupConcurrency !== null && results.includes('ok')) tx.wake(queue);
  return results;
}

/**
 * The multi-row finishes: of plain successes (stored, or removed on a queue that keeps none), and of successes
 * that keep a result (sqlite/chunked.ts).
 */
export interface BulkFinishes {
  readonly plain: ChunkedStatement;
  readonly removePlain: ChunkedStatement;
  readonly withResult: ChunkedStatement;
}

/** Whether the consumer holds `row`'s message for the attempt `f` finishes (else the finish is lost). */
export function heldFor(row: HeldRow | undefined, consumerId: string, f: Finish): row is HeldRow {
  return row?.phase === Phase.Locked && row.consumer === consumerId && row.attempt === f.attempt;
}

/** Where a finish taken one by one moves its message: the rules both SQL stores apply. */
export type FinishStep =
  | {
      readonly to: 'pending';
      readonly readyAt: number;
      /** 1: the requeued run waits its backoff in `done-with-requeue`. */
      readonly requeue: 0 | 1;
      /** A requeued run starts again at attempt 0. */
      readonly resetAttempt: boolean;
      /** Ready now: the queue's workers are woken. */
      readonly wake: boolean;
    }
  | { readonly to: 'failed' }
  | { readonly to: 'done'; readonly backoffUntil: number };

/**
 * A retry waits its backoff; a message marked for requeue goes back with attempt 0, whatever the outcome (after
 * its backoff, if the outcome set one); otherwise an error fails it (its backoff ignored) and a success is done.
 */
export function finishStep(row: { readonly requeue: number }, f: Finish, now: number): FinishStep {
  const readyAt = now + f.backoffMs;
  if (f.outcome === 'retry')
    return { to: 'pending', readyAt, requeue: 0, resetAttempt: false, wake: f.backoffMs === 0 };
  if (row.requeue === 1) {
    const waits = f.backoffMs > 0;
    return { to: 'pending', readyAt, requeue: waits ? 1 : 0, resetAttempt: true, wake: !waits };
  }
  if (f.outcome === 'error') return { to: 'failed' };
  return { to: 'done', backoffUntil: f.backoffMs > 0 ? readyAt : 0 };
}

/**
 * The finishes left to take one by one, in order: each one stored in bulk (in `done`) is answered `ok` in
 * `results` in its place instead, and leaves `done`, so a second finish of its id in the batch is taken on its own.
 * Shared with the PostgreSQL store.
 */
export function* leftToFinish(
  finishes: readonly Finish[],
  done: Set<string>,
  results: FinishResult[],
): Generator<Finish> {
  for (const f of finishes) {
    if (done.delete(f.id)) results.push('ok');
    else yield f;
  }
}

/**
 * Successes written in bulk: those the store took (`stored`: their ids) join `done`, each with its queue event.
 * Shared with the PostgreSQL store.
 */
export function bulkStored(
  tx: Pick<WriteContext, 'event'>,
  finishes: readonly Finish[],
  stored: readonly string[],
  done: Set<string>,
): void {
  const took = new Set(stored);
  for (const f of finishes) {
    if (!took.has(f.id)) continue;
    done.add(f.id);
    tx.event('completed', f.id, f.attempt, finishEventText(f));
  }
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
