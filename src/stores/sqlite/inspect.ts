import { parseFilterClass } from '../../model/filters.js';
import { parseHistory } from '../../model/history.js';
import { decodePayload } from '../../model/payload.js';
import {
  MESSAGE_STATES,
  type ConsumerInfo,
  type MessageState,
  type MessageStatus,
  type Metadata,
  type Outcome,
} from '../../model/types.js';
import { pendingRanges } from './pending.js';
import { stateEndsAt, stateOf, type StateRow } from './state.js';
import type { QueueRow, Statements } from './statements.js';
import type { StoredContent, StoredDetails } from '../contract/contract.js';

/** The columns of statements.ts STATUS_FIELDS. */
export interface StatusRow extends StateRow {
  readonly seq: number;
  readonly id: string;
  readonly attempt: number;
  readonly outcome: Outcome | null;
  readonly last_error: string | null;
  readonly consumer: string | null;
  readonly enqueued_at: number;
  readonly updated_at: number;
  /** Read by status, inspect and a listing with content; absent otherwise. */
  readonly result?: Buffer | null;
  readonly result_encoding?: number | null;
}

/** The columns of statements.ts CONTENT_FIELDS. */
export interface ContentRow {
  readonly payload: Buffer;
  readonly encoding: number;
  readonly metadata: string;
  readonly filters: string;
}

export function statusOf(queue: string, row: StatusRow, now: number): MessageStatus {
  const state = stateOf(row, now);
  return {
    queue,
    id: row.id,
    state,
    attempt: row.attempt,
    outcome: row.outcome,
    lastError: row.last_error,
    enqueuedAt: row.enqueued_at,
    updatedAt: row.updated_at,
    consumer: state === 'locked' || state === 'locked-with-requeue' ? row.consumer : null,
    until: stateEndsAt(row, now),
    ...resultOf(row),
  };
}

/** The `result` field of a status, when the row has one. Shared with the PostgreSQL store. */
export function resultOf(row: { readonly result?: Uint8Array | null; readonly result_encoding?: number | null }): {
  result?: unknown;
} {
  const { result } = row;
  if (result === undefined || result === null) return {};
  return { result: decodePayload(result, row.result_encoding === 1 ? 'bytes' : 'json') };
}

export function contentOf(row: ContentRow): StoredContent {
  return {
    payload: row.payload,
    encoding: row.encoding === 0 ? 'json' : 'bytes',
    metadata: JSON.parse(row.metadata) as Metadata,
    filters: parseFilterClass(row.filters),
  };
}

export function messageStatus(sql: Statements, queue: string, id: string, now: number): MessageStatus | null {
  const row = sql.status.get(queue, id) as StatusRow | undefined;
  return row === undefined ? null : statusOf(queue, row, now);
}

export function messageDetails(sql: Statements, queue: string, id: string, now: number): StoredDetails | null {
  const row = sql.details.get(queue, id) as
    | (StatusRow &
        ContentRow & { policy: string | null; history: string | null; priority: number; group_name: string | null })
    | undefined;
  if (row === undefined) return null;
  return {
    status: statusOf(queue, row, now),
    content: contentOf(row),
    policy: row.policy,
    history: parseHistory(row.history),
    priority: row.priority,
    group: row.group_name,
  };
}

/**
 * Counts per state from the queue's counters (pending + locked, done, failed).
 * A state split by time is counted by walking only the rows of the
 * time-limited side: every lock, pending backoffs (per filter class and priority) and
 * duplicate backoffs; never the ready backlog nor the finished rows.
 */
export function stateCounts(
  sql: Statements,
  queue: string,
  row: QueueRow | undefined,
  now: number,
): Record<MessageState, number> {
  const counts = Object.fromEntries(MESSAGE_STATES.map((s) => [s, 0])) as Record<MessageState, number>;
  if (row === undefined) return counts;
  let pending = row.size;
  for (const r of sql.lockCounts.all({ queue, now }) as { held: number; requeue: number; n: number }[]) {
    pending -= r.n;
    // An expired lock reads as queued.
    counts[r.held === 0 ? 'queued' : r.requeue === 1 ? 'locked-with-requeue' : 'locked'] += r.n;
  }
  for (const { filters, priority } of pendingRanges(sql, queue)) {
    for (const r of sql.backoffCounts.all({ queue, filters, priority, now }) as { requeue: number; n: number }[]) {
      pending -= r.n;
      counts[r.requeue === 1 ? 'done-with-requeue' : 'queued-with-backoff'] += r.n;
    }
  }
  counts.queued += pending;
  const withBackoff = sql.doneBackoffCount.get({ queue, now }) as number;
  counts['done-with-backoff'] = withBackoff;
  counts['done-awaiting-gc'] = row.done - withBackoff;
  counts.failed = row.failed;
  counts['waiting-children'] = row.waiting;
  return counts;
}

/** A consumers row as both SQL stores keep it. */
export interface ConsumerRow {
  readonly id: string;
  readonly host: string;
  readonly pid: number;
  readonly started_at: number;
  readonly seen_at: number;
}

export function liveConsumers(sql: Statements, queue: string, now: number): ConsumerInfo[] {
  return (sql.liveConsumers.all(queue, now) as ConsumerRow[]).map((row) =>
    consumerInfo(row, sql.holding.all(queue, now, row.id) as string[]),
  );
}

/** A consumer's row and the ids it holds, as the API shows them. Shared with the PostgreSQL store. */
export function consumerInfo(row: ConsumerRow, holding: string[]): ConsumerInfo {
  return {
    id: row.id,
    host: row.host,
    pid: row.pid,
    startedAt: row.started_at,
    lastSeenAt: row.seen_at,
    holding,
  };
}
