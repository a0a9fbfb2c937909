/**
 * A message's record, `/queue/{q}/kvmq/msg/{id}`: kvmq's state of a message,
 * beside the protocol keys that carry its payload. Its mod revision is the
 * message's version: every change to a message rewrites the record in the
 * same Txn, and every Txn that changes a message compares it.
 */
import type { PayloadEncoding } from '../../model/payload.js';
import type { AttemptRecord, MessageState, Metadata, Outcome } from '../../model/types.js';

/**
 * `failed`: finished with a final error; its payload is kept at `/kvmq/payload/{id}` (or `payloadKey`).
 * `waiting`: a flow's parent waiting for its children (no ordered key; its payload at `/kvmq/payload/{id}`).
 * `staged`: a message of a flow too big for one Txn, written ahead and not visible yet (flow-staging.ts).
 */
export type Phase = 'pending' | 'locked' | 'done' | 'failed' | 'waiting' | 'staged';

/** A message `[queue, id]` of a flow. */
export type FlowLink = readonly [string, string];

/** A flow node's links, in its record (flow-ends.ts): left out for a message in no flow. */
export interface FlowFields {
  /** Its parent, while it has one. */
  readonly parent?: FlowLink;
  /** It has not ended yet for its parent: its end counts for it. */
  readonly owes?: true;
  /** What its final failure does to its parent, when not `fail`. */
  readonly policy?: 'ignore' | 'remove';
  /** Its children, in the order written (dependencies first). */
  readonly children?: readonly FlowLink[];
  /** Waiting: how many children have not ended yet. */
  readonly left?: number;
  /** Staged: the flow's root queue and id (flow-staging.ts). */
  readonly staged?: FlowLink;
}

/** The parent a flow node's end still counts for; undefined once it owes none (or has no parent). */
export function owedParent(flow: FlowFields | undefined): FlowLink | undefined {
  return flow?.owes === true ? flow.parent : undefined;
}

export interface MessageRecord {
  readonly phase: Phase;
  /** Its key in the ordered queue while pending or locked: `/queue/{q}/{idx}/{id}`. */
  readonly idx: string | null;
  readonly attempt: number;
  /** Pending: claimable from then. */
  readonly readyAt: number;
  /** Locked: held until then; null while a plain consumer (no lock time) holds it. */
  readonly lockUntil: number | null;
  /** Locked: the consumer's registration key. */
  readonly consumer: string | null;
  /** Done: refuses duplicates until then. */
  readonly backoffUntil: number;
  /** Locked: queue again when done. Pending: a requeue waiting for its backoff. */
  readonly requeue: boolean;
  /** The encoding of `/kvmq/payload/{id}` when a later run carries a payload kept there. */
  readonly nextEncoding: PayloadEncoding | null;
  readonly outcome: Outcome | null;
  readonly error: string | null;
  readonly enqueuedAt: number;
  readonly updatedAt: number;
  readonly encoding: PayloadEncoding;
  readonly metadata: Metadata;
  /** The message's filter class (model/filters.ts). */
  readonly filterClass: string;
  /** Who wrote the message first: kvmq's producer, or a plain put to producer/. */
  readonly source: 'kvmq' | 'plain';
  /** A random token of the enqueue that created this run, to recognise one's own write after a retry. */
  readonly nonce: string;
  /** The message's own retry policy, encoded (model/policy.ts), or null. */
  readonly policy: string | null;
  /** Attempts that did not end in a plain success, newest last (model/history.ts). */
  readonly history: readonly AttemptRecord[];
  /** Deliveries lost (lock ran out, holder gone) since the last retry, revive or requeued run. */
  readonly losses: number;
  /**
   * Failed: where the payload is when it is not `/kvmq/payload/{id}` (a plain producer's put kvmq could
   * not take stays at its producer key, readable there).
   */
  readonly payloadKey: string | null;
  /** 0 (runs first) to PRIORITY_MAX; also in the idx of its ordered key (keys.ts newIdx). */
  readonly priority: number;
  /** Its group (groupConcurrency), or null. */
  readonly group: string | null;
  /** The debounce id it is the waiting message of, or null. */
  readonly debounceId: string | null;
  /** Done: what its run's success returned (model/result.ts ResultInRecord); absent for none. */
  readonly result?: string;
  readonly resultEncoding?: 'bytes';
  /** Its place in a flow (flow-ends.ts), or absent. */
  readonly flow?: FlowFields;
}

// Module-level, not per call: decodeRecord runs for every record a watch or a read brings.
function num(v: unknown, fallback = 0): number {
  return typeof v === 'number' && Number.isFinite(v) ? v : fallback;
}

function str(v: unknown): string | null {
  return typeof v === 'string' ? v : null;
}

const PHASES: ReadonlySet<Phase> = new Set(['pending', 'locked', 'done', 'failed', 'waiting', 'staged']);

/** The record, or null when it is not one kvmq wrote. */
export function decodeRecord(value: Buffer): MessageRecord | null {
  let raw: unknown;
  try {
    raw = JSON.parse(value.toString('utf8'));
  } catch {
    return null;
  }
  if (typeof raw !== 'object' || raw === null) return null;
  const r = raw as Record<string, unknown>;
  const phase = r.phase;
  if (!PHASES.has(phase as Phase)) return null;
  const outcome = r.outcome === 'success' || r.outcome === 'error' || r.outcome === 'retry' ? r.outcome : null;
  const encoding = r.encoding === 'bytes' ? 'bytes' : 'json';
  const nextEncoding = r.nextEncoding === 'bytes' || r.nextEncoding === 'json' ? r.nextEncoding : null;
  const metadata =
    typeof r.metadata === 'object' && r.metadata !== null && !Array.isArray(r.metadata) ? (r.metadata as Metadata) : {};
  return {
    phase: phase as Phase,
    idx: str(r.idx),
    attempt: num(r.attempt),
    readyAt: num(r.readyAt),
    lockUntil: r.lockUntil === undefined || r.lockUntil === null ? null : num(r.lockUntil),
    consumer: str(r.consumer),
    backoffUntil: num(r.backoffUntil),
    requeue: r.requeue === true,
    nextEncoding,
    outcome,
    error: str(r.error),
    enqueuedAt: num(r.enqueuedAt),
    updatedAt: num(r.updatedAt, num(r.enqueuedAt)),
    encoding,
    metadata,
    filterClass: str(r.filterClass) ?? '',
    source: r.source === 'plain' ? 'plain' : 'kvmq',
    nonce: str(r.nonce) ?? '',
    policy: str(r.policy),
    history: Array.isArray(r.history) ? (r.history as AttemptRecord[]) : [],
    losses: num(r.losses),
    payloadKey: str(r.payloadKey),
    priority: num(r.priority),
    group: str(r.group),
    debounceId: str(r.debounceId),
    ...(typeof r.result === 'string' ? { result: r.result } : {}),
    ...(r.resultEncoding === 'bytes' ? { resultEncoding: 'bytes' as const } : {}),
    ...(typeof r.flow === 'object' && r.flow !== null ? { flow: r.flow } : {}),
  };
}

/**
 * Fields at their defaults are left out: a record is written for every
 * message, and a million of them should fit etcd's quota with room to spare.
 */
export function encodeRecord(r: MessageRecord): Buffer {
  const out: Record<string, unknown> = { phase: r.phase };
  if (r.idx !== null) out.idx = r.idx;
  if (r.attempt !== 0) out.attempt = r.attempt;
  out.readyAt = r.readyAt;
  if (r.lockUntil !== null) out.lockUntil = r.lockUntil;
  if (r.consumer !== null) out.consumer = r.consumer;
  if (r.backoffUntil !== 0) out.backoffUntil = r.backoffUntil;
  if (r.requeue) out.requeue = true;
  if (r.nextEncoding !== null) out.nextEncoding = r.nextEncoding;
  if (r.outcome !== null) out.outcome = r.outcome;
  if (r.error !== null) out.error = r.error;
  out.enqueuedAt = r.enqueuedAt;
  if (r.updatedAt !== r.enqueuedAt) out.updatedAt = r.updatedAt;
  if (r.encoding !== 'json') out.encoding = r.encoding;
  if (Object.keys(r.metadata).length > 0) out.metadata = r.metadata;
  if (r.filterClass !== '') out.filterClass = r.filterClass;
  if (r.source !== 'kvmq') out.source = r.source;
  if (r.nonce !== '') out.nonce = r.nonce;
  if (r.policy !== null) out.policy = r.policy;
  if (r.history.length > 0) out.history = r.history;
  if (r.losses !== 0) out.losses = r.losses;
  if (r.payloadKey !== null) out.payloadKey = r.payloadKey;
  if (r.priority !== 0) out.priority = r.priority;
  if (r.group !== null) out.group = r.group;
  if (r.debounceId !== null) out.debounceId = r.debounceId;
  if (r.result !== undefined) out.result = r.result;
  if (r.resultEncoding !== undefined) out.resultEncoding = r.resultEncoding;
  if (r.flow !== undefined && Object.keys(r.flow).length > 0) out.flow = r.flow;
  return Buffer.from(JSON.stringify(out), 'utf8');
}

/** A message's state, derived from its phase and times as Carmine derives it (same rules as the SQLite store). */
export function stateOf(r: MessageRecord, now: number): MessageState {
  switch (r.phase) {
    case 'pending':
      if (r.readyAt <= now) return 'queued';
      return r.requeue ? 'done-with-requeue' : 'queued-with-backoff';
    case 'locked':
      // An expired lock frees the message for the next taker.
      if (r.lockUntil !== null && r.lockUntil <= now) return 'queued';
      return r.requeue ? 'locked-with-requeue' : 'locked';
    case 'done':
      return r.backoffUntil > now ? 'done-with-backoff' : 'done-awaiting-gc';
    case 'failed':
      return 'failed';
    case 'waiting':
      return 'waiting-children';
    // Not visible (status reads say none); an enqueue of its id is refused as for a queued one.
    case 'staged':
      return 'queued';
  }
}

/** When the current state ends by itself, or null. */
export function stateEndsAt(r: MessageRecord, now: number): number | null {
  if (r.phase === 'failed' || r.phase === 'waiting' || r.phase === 'staged') return null;
  const at = r.phase === 'pending' ? r.readyAt : r.phase === 'locked' ? (r.lockUntil ?? 0) : r.backoffUntil;
  return at > now ? at : null;
}
