/** What an update does to a message row, shared by both SQL stores (their rows and states are the same). */
import { Phase } from './schema.js';
import { stateOf, type StateRow } from './state.js';
import { UPDATABLE_STATES, type MessageEdit } from '../../model/update.js';
import type { ActionResult } from '../../model/types.js';

/** The columns an update writes, each null to keep the row's own (SQL coalesce). */
export interface UpdateColumns {
  readonly seq: number;
  readonly payload: Buffer | null;
  readonly encoding: number | null;
  readonly priority: number | null;
  readonly readyAt: number | null;
  readonly filters: string | null;
}

/**
 * A refusal (its state; null: no such message), or the columns to write and the result. A held message whose lock
 * ended reads as queued, but its holder may still finish it: refused as `locked`.
 */
export type UpdatePlan =
  | { readonly refused: ActionResult }
  | { readonly refused: null; readonly columns: UpdateColumns; readonly result: ActionResult };

export function updatePlan(
  id: string,
  row: (StateRow & { readonly seq: number }) | undefined,
  now: number,
  edit: MessageEdit,
): UpdatePlan {
  if (row === undefined) return { refused: { ok: false, id, state: null } };
  const state = row.phase === Phase.Locked && row.lock_until <= now ? 'locked' : stateOf(row, now);
  if (!UPDATABLE_STATES.has(state)) return { refused: { ok: false, id, state } };
  const readyAt = edit.delayMs === null ? null : now + edit.delayMs;
  const payload = edit.payload === null ? null : edit.payload.bytes;
  const columns = {
    seq: row.seq,
    payload: payload === null ? null : Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength),
    encoding: edit.payload === null ? null : edit.payload.encoding === 'json' ? 0 : 1,
    priority: edit.priority,
    readyAt,
    filters: edit.filters === null ? null : edit.filters.filterClass,
  };
  const after = (readyAt ?? row.ready_at) <= now ? 'queued' : 'queued-with-backoff';
  return { refused: null, columns, result: { ok: true, id, state: after } };
}
