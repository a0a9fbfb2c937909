/**
 * Waiting for a message's final outcome. The message's status is the truth; what wakes the wait to look again
 * is the queue's events when they are on (the store's notification, then a read of what happened to the
 * message), else a poll that slows from 25 ms to 500 ms. A message that left the queue (removed, GC'd, moved
 * to the dead-letter queue) is judged by its last event, or by the dead-letter queue, or reported as gone.
 */
import { MessageGoneError, TimeoutError } from '../model/errors.js';
import { Doorbell } from './doorbell.js';
import type { StoredEvent } from '../model/events.js';
import type { MessageStatus } from '../model/types.js';
import type { Store } from '../stores/contract/contract.js';

/** How a message ended, as `waitFor` resolves it; `R` is the handler's result type. */
export interface WaitResult<R = unknown> {
  /** `completed`: its handler succeeded; `failed`: it failed for good (see `error`). */
  readonly outcome: 'completed' | 'failed';
  /** The delivery that ended it (0 when only the dead-letter queue, which restarts the count, told it). */
  readonly attempt: number;
  /** The last error, for a failure. */
  readonly error: string | null;
  /**
   * The message's status when the outcome was seen: in the queue, or in its dead-letter queue once moved there;
   * null when only the event told it (the message had already left the queue).
   */
  readonly status: MessageStatus<R> | null;
  /**
   * For `completed`: the result the handler returned with its success (`status.result`); absent when it
   * returned none, or when only the event told the outcome (the message had already left the queue).
   */
  readonly result?: R;
}

const FIRST_POLL_MS = 25;
const MAX_POLL_MS = 500;
// With events on a wake-up comes with each transition; this only bounds a lost notification.
const EVENTS_POLL_MS = 1000;
const PAGE_SIZE = 1000;

export async function waitForOutcome(
  store: Store,
  queue: string,
  id: string,
  timeoutMs: number,
  signal: AbortSignal | undefined,
): Promise<WaitResult> {
  const deadline = Date.now() + timeoutMs;
  const config = await store.config(queue);
  const bell = new Doorbell();
  const aborted = signal ?? new AbortController().signal;
  const unsubscribe = config.events ? store.subscribeEvents(queue, bell.ring) : null;
  try {
    let cursor = config.events ? await store.eventsHead(queue) : null;
    let last: StoredEvent | null = null;
    let pollMs = FIRST_POLL_MS;
    for (;;) {
      if (cursor !== null) ({ cursor, last } = await lastEventOf(store, queue, id, cursor, last));
      const status = await store.status(queue, id);
      const ended = status === null ? await afterLeaving(store, config.deadLetterQueue, id, last) : outcomeOf(status);
      if (ended !== null) return ended;
      if (status === null) throw new MessageGoneError(queue, id);
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new TimeoutError(
          `message '${id}' of queue '${queue}' did not complete or fail within ${timeoutMs} ms (it is ${status.state})`,
        );
      }
      await bell.wait(Math.min(left, config.events ? EVENTS_POLL_MS : pollMs), aborted);
      aborted.throwIfAborted();
      pollMs = Math.min(pollMs * 2, MAX_POLL_MS);
    }
  } catch (error) {
    // A client closed under the wait: say so, rather than how the store call failed.
    if (aborted.aborted) throw aborted.reason;
    throw error;
  } finally {
    unsubscribe?.();
  }
}

/** Reads the events written since `cursor`, keeping the last one about `id`. A trimmed gap is fine: status rules. */
async function lastEventOf(
  store: Store,
  queue: string,
  id: string,
  cursor: string,
  last: StoredEvent | null,
): Promise<{ cursor: string; last: StoredEvent | null }> {
  for (;;) {
    const page = await store.readEvents(queue, cursor, PAGE_SIZE);
    for (const event of page.events) if (event.id === id) last = event;
    cursor = page.cursor;
    if (page.events.length < PAGE_SIZE) return { cursor, last };
  }
}

function outcomeOf(status: MessageStatus): WaitResult | null {
  switch (status.state) {
    case 'failed':
      return { outcome: 'failed', attempt: status.attempt, error: status.lastError, status };
    case 'done-awaiting-gc':
    case 'done-with-backoff': {
      const completed = { outcome: 'completed', attempt: status.attempt, error: null, status } as const;
      return 'result' in status ? { ...completed, result: status.result } : completed;
    }
    default:
      return null;
  }
}

/** A message no longer in its queue: its last event says how it ended, else its dead-letter queue may hold it. */
async function afterLeaving(
  store: Store,
  deadLetterQueue: string | null,
  id: string,
  last: StoredEvent | null,
): Promise<WaitResult | null> {
  if (last?.type === 'completed' || last?.type === 'failed') {
    const status = last.type === 'failed' && deadLetterQueue !== null ? await store.status(deadLetterQueue, id) : null;
    return { outcome: last.type, attempt: last.attempt, error: last.error ?? null, status };
  }
  if (deadLetterQueue === null || last?.type === 'removed') return null;
  const moved = await store.status(deadLetterQueue, id);
  if (moved?.outcome !== 'error') return null;
  return { outcome: 'failed', attempt: moved.attempt, error: moved.lastError, status: moved };
}
