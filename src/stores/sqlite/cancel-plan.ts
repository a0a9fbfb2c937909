/** What a cancel does to a message row, shared by both SQL stores (their rows and states are the same). */
import { Phase } from './schema.js';
import { historyWith } from './failures.js';
import { stateOf, type StateRow } from './state.js';
import { CANCELABLE_STATES } from '../../model/cancel.js';
import type { ActionResult } from '../../model/types.js';

/** A message row as a cancel reads it. */
export interface CancelRow extends StateRow {
  readonly seq: number;
  readonly id: string;
  readonly consumer: string | null;
  readonly attempt: number;
  readonly filters: string;
  readonly history: string | null;
  /** 1 while a flow's parent waits for this message (sqlite/flows.ts). */
  readonly parent_wait: number;
}

/**
 * A refusal (its state; null: no such message), or the failure to write: a held message (phase locked, even
 * with its lock ended, since its holder may still finish it) gets a history record naming its holder.
 */
export type CancelPlan =
  | { readonly refused: ActionResult }
  | { readonly refused: null; readonly running: boolean; readonly history: string | null };

export function cancelPlan(id: string, row: CancelRow | undefined, now: number, error: string): CancelPlan {
  if (row === undefined) return { refused: { ok: false, id, state: null } };
  const state = stateOf(row, now);
  if (!CANCELABLE_STATES.has(state)) return { refused: { ok: false, id, state } };
  const running = row.phase === Phase.Locked;
  if (!running) return { refused: null, running, history: null };
  const record = { attempt: row.attempt, startedAt: null, endedAt: now, consumer: row.consumer, error };
  return { refused: null, running, history: historyWith(row.history, { ...record, outcome: 'error' }) };
}
