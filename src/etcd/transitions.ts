/**
 * How a message's record changes at each step, shared by the dispatcher
 * (moves, deliveries, plain acks) and kvmq's producers and consumers
 * (enqueue, finish, extend). Pure functions: the caller writes the result in
 * one Txn guarded by the record's mod revision.
 */
import type { Finish } from '../store/contract.js';
import type { PayloadEncoding } from '../model/payload.js';
import type { MessageRecord } from './record.js';
import type { Metadata } from '../model/types.js';

export interface NewRecord {
  readonly idx: string;
  readonly encoding: PayloadEncoding;
  readonly metadata: Metadata;
  readonly filterClass: string;
  readonly readyAt: number;
  readonly source: 'kvmq' | 'plain';
  readonly nonce: string;
}

export function freshRecord(m: NewRecord, now: number): MessageRecord {
  return {
    phase: 'pending',
    idx: m.idx,
    attempt: 0,
    readyAt: m.readyAt,
    lockUntil: null,
    consumer: null,
    backoffUntil: 0,
    requeue: false,
    nextEncoding: null,
    outcome: null,
    error: null,
    enqueuedAt: now,
    updatedAt: now,
    encoding: m.encoding,
    metadata: m.metadata,
    filterClass: m.filterClass,
    source: m.source,
    nonce: m.nonce,
  };
}

/**
 * Handed to a consumer: one more attempt, locked until `lockUntil` (null:
 * while its registration lives). A pending requeue mark (done-with-requeue)
 * is used up; one taken over from an expired lock keeps its mark.
 */
export function delivered(r: MessageRecord, consumerKey: string, lockUntil: number | null, now: number): MessageRecord {
  const requeue = r.phase === 'pending' ? false : r.requeue;
  return { ...r, phase: 'locked', consumer: consumerKey, lockUntil, requeue, attempt: r.attempt + 1, updatedAt: now };
}

/** Taken from a consumer that never started on it (gone, or released unclaimed): back in the queue. */
export function undelivered(r: MessageRecord, now: number, undoAttempt: boolean): MessageRecord {
  return {
    ...r,
    phase: 'pending',
    consumer: null,
    lockUntil: null,
    readyAt: Math.min(r.readyAt, now),
    attempt: undoAttempt ? Math.max(0, r.attempt - 1) : r.attempt,
    updatedAt: now,
  };
}

export function extended(r: MessageRecord, lockUntil: number): MessageRecord {
  return { ...r, lockUntil };
}

export interface FinishedRecord {
  readonly record: MessageRecord;
  /** The message leaves the ordered queue (done) or stays in it (retry, requeue). */
  readonly leavesQueue: boolean;
  /** Its kept payload (`/kvmq/payload/{id}`) becomes the ordered key's value for the next run. */
  readonly usesNextPayload: boolean;
  /** Keep the payload that ran, so a requeue during the done backoff can run it again. */
  readonly keepsPayload: boolean;
}

/**
 * The record after a handler's outcome (the same rules as the SQLite store):
 * retry goes back to the queue after its backoff; a message marked for
 * requeue goes back with attempt 0; anything else is done, refusing
 * duplicates for `backoffMs`.
 */
export function finished(r: MessageRecord, f: Omit<Finish, 'id' | 'attempt'>, now: number): FinishedRecord {
  const common = { consumer: null, lockUntil: null, outcome: f.outcome, error: f.error, updatedAt: now } as const;
  const next = r.nextEncoding !== null;
  const encoding = r.nextEncoding ?? r.encoding;
  if (f.outcome === 'retry') {
    const record: MessageRecord = {
      ...r,
      ...common,
      phase: 'pending',
      readyAt: now + f.backoffMs,
      requeue: false,
      nextEncoding: null,
      encoding,
    };
    return { record, leavesQueue: false, usesNextPayload: next, keepsPayload: false };
  }
  if (r.requeue) {
    const record: MessageRecord = {
      ...r,
      ...common,
      phase: 'pending',
      readyAt: now + f.backoffMs,
      // With a backoff the requeued run waits in done-with-requeue.
      requeue: f.backoffMs > 0,
      attempt: 0,
      nextEncoding: null,
      encoding,
    };
    return { record, leavesQueue: false, usesNextPayload: next, keepsPayload: false };
  }
  const record: MessageRecord = {
    ...r,
    ...common,
    phase: 'done',
    idx: null,
    backoffUntil: now + f.backoffMs,
    requeue: false,
  };
  return { record, leavesQueue: true, usesNextPayload: false, keepsPayload: f.backoffMs > 0 };
}
