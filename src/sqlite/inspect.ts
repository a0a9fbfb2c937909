import {
  MESSAGE_STATES,
  type ConsumerInfo,
  type MessageState,
  type MessageStatus,
  type Outcome,
} from '../model/types.js';
import { stateEndsAt, stateOf, type StateRow } from './state.js';
import type { Statements } from './statements.js';

interface StatusRow extends StateRow {
  readonly id: string;
  readonly attempt: number;
  readonly outcome: Outcome | null;
  readonly last_error: string | null;
  readonly consumer: string | null;
  readonly enqueued_at: number;
  readonly updated_at: number;
}

export function messageStatus(sql: Statements, queue: string, id: string, now: number): MessageStatus | null {
  const row = sql.status.get(queue, id) as StatusRow | undefined;
  if (row === undefined) return null;
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
  };
}

interface CountRow {
  readonly phase: number;
  readonly requeue: number;
  readonly later: number;
  readonly held: number;
  readonly blocking: number;
  readonly n: number;
}

/** Counts per state; one pass over the queue's rows, grouped by what decides the state. */
export function stateCounts(sql: Statements, queue: string, now: number): Record<MessageState, number> {
  const counts = Object.fromEntries(MESSAGE_STATES.map((s) => [s, 0])) as Record<MessageState, number>;
  for (const row of sql.counts.all({ queue, now }) as CountRow[]) {
    // The grouped flags stand in for the times: `x > now` is 1 exactly when stateOf's comparison holds.
    const state = stateOf(
      {
        phase: row.phase,
        requeue: row.requeue,
        ready_at: row.later === 1 ? now + 1 : now,
        lock_until: row.held === 1 ? now + 1 : now,
        backoff_until: row.blocking === 1 ? now + 1 : now,
      },
      now,
    );
    counts[state] += row.n;
  }
  return counts;
}

interface ConsumerRow {
  readonly id: string;
  readonly host: string;
  readonly pid: number;
  readonly started_at: number;
  readonly seen_at: number;
}

export function liveConsumers(sql: Statements, queue: string, now: number): ConsumerInfo[] {
  return (sql.liveConsumers.all(queue, now) as ConsumerRow[]).map((row) => ({
    id: row.id,
    host: row.host,
    pid: row.pid,
    startedAt: row.started_at,
    lastSeenAt: row.seen_at,
    holding: sql.holding.all(queue, now, row.id) as string[],
  }));
}
