/** What `update` may change of a waiting message, and which states it applies to. */
import type { FilterValues, MessageState, Payload } from './types.js';
import type { PayloadEncoding } from './payload.js';

/** The states an update applies to: waiting (queued) or delayed. A held or finished message refuses it. */
export const UPDATABLE_STATES: ReadonlySet<MessageState> = new Set<MessageState>(['queued', 'queued-with-backoff']);

/** `client.update`'s changes: each one given replaces the message's own; the rest stay. */
export interface UpdateOptions<P = Payload> {
  /** The new payload, checked and encoded as at enqueue (the store's size limit). */
  readonly payload?: P;
  /** The new priority, 0 (runs first) to 1000. */
  readonly priority?: number;
  /** Run no earlier than this time (a Date or ms since the epoch; one past runs now). Not with `delayMs`. */
  readonly runAt?: Date | number;
  /** Run this many ms from now (0: now). Not with `runAt`. */
  readonly delayMs?: number;
  /** The new filter values, checked against the queue's filters as at enqueue; `{}` for none. */
  readonly filters?: FilterValues;
}

/**
 * A waiting message's changes as a store takes them: checked and encoded; null leaves that part as it is. A
 * store applies all of them in one atomic write, or none (the message was no longer waiting).
 */
export interface MessageEdit {
  readonly payload: { readonly bytes: Uint8Array; readonly encoding: PayloadEncoding } | null;
  readonly priority: number | null;
  /** Ready this many ms after the store's now (0: now); a LIFO message given one takes its place by ready time. */
  readonly delayMs: number | null;
  /** The filter values and their canonical class (model/filters.ts). */
  readonly filters: { readonly values: FilterValues; readonly filterClass: string } | null;
}

/** An edit that changes nothing: refused at the boundary, since it would only read the message's state. */
export function emptyEdit(edit: MessageEdit): boolean {
  return edit.payload === null && edit.priority === null && edit.delayMs === null && edit.filters === null;
}
