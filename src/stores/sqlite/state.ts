/** A message row's state is derived from its phase and times, as Carmine derives it from its hashes. */
import { Phase } from './schema.js';
import type { MessageState } from '../../model/types.js';

export interface StateRow {
  readonly phase: number;
  readonly ready_at: number;
  readonly lock_until: number;
  readonly backoff_until: number;
  readonly requeue: number;
}

export function stateOf(row: StateRow, now: number): MessageState {
  switch (row.phase) {
    case Phase.Pending:
      if (row.ready_at <= now) return 'queued';
      return row.requeue === 1 ? 'done-with-requeue' : 'queued-with-backoff';
    case Phase.Locked:
      // An expired lock frees the message for the next claim.
      if (row.lock_until <= now) return 'queued';
      return row.requeue === 1 ? 'locked-with-requeue' : 'locked';
    case Phase.Done:
      return row.backoff_until > now ? 'done-with-backoff' : 'done-awaiting-gc';
    case Phase.WaitingChildren:
      return 'waiting-children';
    default:
      return 'failed';
  }
}

/** When the current state ends by itself, or null. */
export function stateEndsAt(row: StateRow, now: number): number | null {
  if (row.phase === Phase.Failed || row.phase === Phase.WaitingChildren) return null;
  const at =
    row.phase === Phase.Pending ? row.ready_at : row.phase === Phase.Locked ? row.lock_until : row.backoff_until;
  return at > now ? at : null;
}
