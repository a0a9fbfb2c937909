/**
 * How a message's record changes at each step, shared by the dispatcher
 * (moves, deliveries, plain acks) and kvmq's producers and consumers
 * (enqueue, finish, extend). Pure functions: the caller writes the result in
 * one Txn guarded by the record's mod revision.
 */
import { newNonce } from './nonce.js';
import { decodePolicy } from '../../model/policy.js';
import { appendHistory, maxDeliveriesError } from '../../model/history.js';
import { resultInRecord } from '../../model/result.js';
import { newIdx } from './keys.js';
import { encodeRecord, owedParent } from './record.js';
import type { Finish } from '../contract/contract.js';
import type { PayloadEncoding } from '../../model/payload.js';
import type { FlowFields, FlowLink, MessageRecord } from './record.js';
import type { Compare, Op } from './kv.js';
import type { QueueKeys } from './keys.js';
import type { AttemptRecord, Metadata } from '../../model/types.js';

export interface NewRecord {
  readonly idx: string;
  readonly encoding: PayloadEncoding;
  readonly metadata: Metadata;
  readonly filterClass: string;
  readonly readyAt: number;
  readonly source: 'kvmq' | 'plain';
  readonly nonce: string;
  readonly policy: string | null;
  /** Kept from an earlier run of the id (a revive), else empty. */
  readonly history?: readonly AttemptRecord[];
  readonly priority?: number;
  readonly group?: string | null;
  readonly debounceId?: string | null;
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
    policy: m.policy,
    history: m.history ?? [],
    losses: 0,
    payloadKey: null,
    priority: m.priority ?? 0,
    group: m.group ?? null,
    debounceId: m.debounceId ?? null,
  };
}

/** The consumer's id from its registration key (the last segment). */
export function consumerIdOf(key: string | null): string | null {
  return key === null ? null : key.slice(key.lastIndexOf('/') + 1);
}

// Index entries' value (never written to: shared by every entry, not one per call).
const EMPTY = Buffer.alloc(0);

/**
 * The index entries a version of a record has, besides its record and ordered key: a pending message in
 * a backoff (`readyAt` after its last write), a finished one (done or failed, by finish time), one refusing
 * duplicates, a failed one whose payload stayed at a producer key, the waiting message of a debounce id. Hot paths (enqueue, delivery, success)
 * write at most the done entry they always wrote.
 */
export function indexEntries(keys: QueueKeys, id: string, r: MessageRecord | null): { key: string; value: Buffer }[] {
  if (r === null) return [];
  const entries = phaseEntries(keys, id, r);
  // A flow's child whose end has not been counted for its parent: not ended yet (for clear), or ended where its
  // parent could not be written (a dispatcher's Txn), for GC to count (flow-ends.ts).
  const parent = owedParent(r.flow);
  if (parent !== undefined && r.phase !== 'staged') {
    const ended = r.phase === 'done' || r.phase === 'failed';
    entries.push({ key: ended ? keys.unsettled(id) : keys.owes(id), value: owedValue(parent, r.flow?.policy) });
  }
  return entries;
}

function phaseEntries(keys: QueueKeys, id: string, r: MessageRecord): { key: string; value: Buffer }[] {
  const empty = EMPTY;
  switch (r.phase) {
    case 'waiting':
      return [{ key: keys.waiting(r.enqueuedAt, id), value: empty }];
    case 'staged': {
      const [root, flow] = r.flow?.staged ?? ['', ''];
      return [{ key: keys.staged(flow, id), value: Buffer.from(root) }];
    }
    case 'pending': {
      const entries =
        r.readyAt > r.updatedAt
          ? [{ key: keys.backoff(r.readyAt, id), value: r.requeue ? Buffer.from('r') : empty }]
          : [];
      // The message a debounce replaces: never delivered yet (a retry or a requeue is a run of its own).
      if (r.debounceId !== null && r.attempt === 0 && !r.requeue) {
        entries.push({ key: keys.debounce(r.debounceId), value: Buffer.from(id) });
      }
      // A time to live, for the GC's sweep (expiry.ts): only a message with a policy reads it.
      if (r.policy !== null && r.attempt === 0) {
        const expireAt = decodePolicy(r.policy)?.expireAt;
        if (expireAt !== undefined) entries.push({ key: keys.expiry(expireAt, id), value: empty });
      }
      return entries;
    }
    case 'locked':
      return [];
    case 'done': {
      const entries = [{ key: keys.done(r.updatedAt, id), value: empty }];
      if (r.backoffUntil > r.updatedAt) entries.push({ key: keys.refuse(r.backoffUntil, id), value: empty });
      return entries;
    }
    case 'failed': {
      const entries = [{ key: keys.failed(r.updatedAt, id), value: empty }];
      if (r.payloadKey !== null) entries.push({ key: keys.stuck(id), value: empty });
      return entries;
    }
  }
}

/** The index ops of a record changing from `before` to `after` (null: absent): stale entries go, new ones come. */
export function indexOps(keys: QueueKeys, id: string, before: MessageRecord | null, after: MessageRecord | null): Op[] {
  const old = indexEntries(keys, id, before);
  const next = indexEntries(keys, id, after);
  const ops: Op[] = [];
  for (const o of old) {
    if (!next.some((n) => n.key === o.key)) ops.push({ type: 'delete', key: o.key });
  }
  for (const n of next) {
    const was = old.find((o) => o.key === n.key);
    if (was === undefined || !was.value.equals(n.value)) ops.push({ type: 'put', key: n.key, value: n.value });
  }
  return ops;
}

/** A message that will not run again: failed, with its error, its payload kept for a retry. */
export function failedRecord(r: MessageRecord, error: string | null, now: number): MessageRecord {
  return {
    ...r,
    phase: 'failed',
    idx: null,
    consumer: null,
    lockUntil: null,
    requeue: false,
    nextEncoding: null,
    // A requeue's payload, kept at /kvmq/payload/{id}, is the one a retry runs.
    encoding: r.nextEncoding ?? r.encoding,
    outcome: 'error',
    error,
    updatedAt: now,
  };
}

/**
 * The holder lost the message (gone, or its lock ran out and the store takes it back): one loss more,
 * with a `lost` record in its history; at `maxDeliveries` (0: never) it fails instead of running again.
 */
export function lostDelivery(r: MessageRecord, maxDeliveries: number, now: number): MessageRecord {
  const losses = r.losses + 1;
  const history = appendHistory(r.history, {
    attempt: r.attempt,
    startedAt: null,
    endedAt: now,
    consumer: consumerIdOf(r.consumer),
    outcome: 'lost',
    error: null,
  });
  const counted = { ...r, losses, history };
  if (maxDeliveries > 0 && losses >= maxDeliveries) return failedRecord(counted, maxDeliveriesError(losses), now);
  return counted;
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
 * requeue goes back with attempt 0; an error fails it; a success is done,
 * refusing duplicates for `backoffMs`. An error or retry of a run that
 * started adds a record to its history.
 */
export function finished(r: MessageRecord, f: Omit<Finish, 'id' | 'attempt'>, now: number): FinishedRecord {
  const history =
    f.outcome !== 'success' && f.startedAt !== null
      ? appendHistory(r.history, {
          attempt: r.attempt,
          startedAt: f.startedAt,
          endedAt: now,
          consumer: consumerIdOf(r.consumer),
          outcome: f.outcome,
          error: f.error,
        })
      : r.history;
  const common = {
    consumer: null,
    lockUntil: null,
    outcome: f.outcome,
    error: f.error,
    updatedAt: now,
    history,
  } as const;
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
      losses: 0,
      nextEncoding: null,
      encoding,
      // The requeued run starts without this one's result.
      result: undefined,
      resultEncoding: undefined,
    };
    return { record, leavesQueue: false, usesNextPayload: next, keepsPayload: false };
  }
  if (f.outcome === 'error') {
    const record = failedRecord({ ...r, history }, f.error, now);
    return { record, leavesQueue: true, usesNextPayload: false, keepsPayload: true };
  }
  const record: MessageRecord = {
    ...r,
    ...common,
    phase: 'done',
    idx: null,
    backoffUntil: now + f.backoffMs,
    requeue: false,
    // In the record the finish puts anyway: no key, no op more.
    ...(f.result === undefined ? {} : resultInRecord(f.result)),
  };
  return { record, leavesQueue: true, usesNextPayload: false, keepsPayload: f.backoffMs > 0 };
}

/**
 * The ops of a finish (a handler's outcome, or a plain consumer's ack) besides the delivery's delete: the
 * record, the ordered key leaving (done, failed) or taking the kept next payload (a requeue), the payload
 * kept for a requeue during a done backoff or for a retry of a failed message, and the index entries.
 */
export function finishOps(
  keys: QueueKeys,
  id: string,
  before: MessageRecord,
  result: FinishedRecord,
  orderedKey: string,
  ran: Buffer,
  nextPayload: Buffer | null,
): Op[] {
  const ops: Op[] = [{ type: 'put', key: keys.record(id), value: encodeRecord(result.record) }];
  if (result.leavesQueue) ops.push({ type: 'delete', key: orderedKey });
  if (result.keepsPayload) ops.push({ type: 'put', key: keys.payload(id), value: ran });
  if (result.usesNextPayload && nextPayload !== null) {
    ops.push({ type: 'put', key: orderedKey, value: nextPayload });
    ops.push({ type: 'delete', key: keys.payload(id) });
  }
  ops.push(...indexOps(keys, id, before, result.record));
  return ops;
}

/**
 * A message failing in one queue moved, in the same Txn, to its dead-letter queue: there it is queued now
 * at attempt 0 with its content, policy, outcome, error and history; here it is gone. The Txn must also
 * compare `Version(dead-letter record) = 0` (deadLetterCompare): an id already there keeps it failed here.
 */
export function deadLetterOps(
  keys: QueueKeys,
  dlq: QueueKeys,
  id: string,
  before: MessageRecord,
  failed: MessageRecord,
  orderedKey: string | null,
  payload: Buffer,
  now: number,
): Op[] {
  const idx = newIdx(failed.priority);
  const moved: MessageRecord = {
    ...failed,
    phase: 'pending',
    idx,
    attempt: 0,
    readyAt: now,
    updatedAt: now,
    losses: 0,
    backoffUntil: 0,
    payloadKey: null,
    nonce: newNonce(),
    // It has ended for its flow: it starts in the dead-letter queue in none.
    flow: undefined,
  };
  const ops: Op[] = [
    { type: 'delete', key: keys.record(id) },
    { type: 'delete', key: keys.payload(id) },
    { type: 'delete', key: keys.report(id) },
    ...indexOps(keys, id, before, null),
    { type: 'put', key: dlq.ordered(idx, id), value: payload },
    { type: 'put', key: dlq.record(id), value: encodeRecord(moved) },
  ];
  if (orderedKey !== null) ops.push({ type: 'delete', key: orderedKey });
  if (before.payloadKey !== null) ops.push({ type: 'delete', key: before.payloadKey });
  // A flow child whose end this Txn does not count (the dispatcher's, which writes no other queue): its record
  // leaves, so an unsettled entry carries the end for GC to count (flow-ends.ts settleEnded).
  const parent = owedParent(failed.flow);
  if (parent !== undefined) {
    ops.push({ type: 'put', key: keys.unsettled(id), value: owedValue(parent, failed.flow?.policy, failed.error) });
  }
  return ops;
}

/** Marks an unsettled entry whose child was moved to the dead-letter queue: its value holds the end itself. */
const DEAD_LETTERED_END = 'dead-lettered';

/**
 * An owes or unsettled entry's value, `[queue, id, policy]` of the parent; a child moved to the dead-letter
 * queue (`deadLetteredError` given, null for none) adds its end: `[..., "dead-lettered", error]`.
 */
function owedValue(parent: FlowLink, policy: FlowFields['policy'], deadLetteredError?: string | null): Buffer {
  const end = deadLetteredError === undefined ? [] : [DEAD_LETTERED_END, deadLetteredError];
  return Buffer.from(JSON.stringify([...parent, policy ?? 'fail', ...end]));
}

/** An owes or unsettled entry read back: the child's debt to its parent, and a dead-lettered child's end. */
export function readOwed(value: Buffer): { flow: FlowFields; deadLettered: { error: string | null } | null } {
  const [queue, id, policy, mark, error] = JSON.parse(value.toString('utf8')) as unknown[];
  const flow: FlowFields = {
    parent: [String(queue), String(id)],
    owes: true,
    ...(policy === 'ignore' || policy === 'remove' ? { policy } : {}),
  };
  const deadLettered = mark === DEAD_LETTERED_END ? { error: typeof error === 'string' ? error : null } : null;
  return { flow, deadLettered };
}

export function deadLetterCompare(dlq: QueueKeys, id: string): Compare {
  return { key: dlq.record(id), target: 'version', result: '=', operand: 0 };
}
