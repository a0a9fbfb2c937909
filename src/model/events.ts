/**
 * Queue events: what happened to a queue's messages, written by the store in the
 * same atomic write as the transition itself, for queues configured with `events: true`.
 */
import { errorTail } from './history.js';

/** Every transition an event records. */
export const QUEUE_EVENT_TYPES = [
  'enqueued',
  'started',
  'completed',
  'failed',
  'retrying',
  'removed',
  'progress',
  'updated',
] as const;

/**
 * - `enqueued`: an enqueue stored the message (created, revived or marked for requeue), or `retry`/`retryFailed`
 *   queued a failed one again (attempt 0: the next delivery is attempt 1).
 * - `started`: a consumer claimed it (each delivery, including after a lost lock).
 * - `completed`, `retrying`, `failed`: a finish with that outcome was stored (`failed` also when `maxDeliveries`
 *   fails it at a claim, or a dead-letter move takes it away).
 * - `removed`: `remove` deleted it.
 * - `progress`: a handler's `job.progress(value)` was stored (coalesced: at most a few per second per message).
 * - `updated`: `update` changed the waiting message (payload, priority, ready time or filters).
 */
export type QueueEventType = (typeof QUEUE_EVENT_TYPES)[number];

export interface QueueEvent {
  readonly type: QueueEventType;
  readonly id: string;
  /** When the store wrote it, ms since the epoch (the writer's clock). */
  readonly at: number;
  /** The delivery it is about: 0 before the first, 1 for the first delivery. */
  readonly attempt: number;
  /** The error's text, for `failed` and `retrying` when there is one. */
  readonly error?: string;
  /** For `progress`: the value the handler reported. */
  readonly progress?: unknown;
  /** For `completed`: the result the handler returned with its success, as stored (decoded); absent for none. */
  readonly result?: unknown;
}

/** An event as a store returns it: with the position to read on from. */
export interface StoredEvent extends QueueEvent {
  /** Opaque, ordered only by the store that made it; pass it back to read what came after. */
  readonly cursor: string;
}

/** Default retention of a queue's events, per `eventsMaxCount` and `eventsMaxAgeMs`. */
export const EVENTS_MAX_COUNT = 10_000;

// How a `completed` event's text marks a result of bytes: JSON text never starts with a letter b.
const BYTES_MARK = 'base64:';

/**
 * The text a `completed` event keeps its result in, in the slot other events keep their error: a JSON result as
 * its JSON text, bytes as `base64:` and their base64. Every store writes it whole (never cut as errors are), so
 * an event's result is bounded by RESULT_MAX_BYTES as the stored result is.
 */
// Typed as an encoded payload is, without importing payload.ts (which errors.ts, importing this, would close a cycle).
export function resultEventText(result: { readonly bytes: Uint8Array; readonly encoding: 'json' | 'bytes' }): string {
  const bytes = Buffer.from(result.bytes.buffer, result.bytes.byteOffset, result.bytes.byteLength);
  return result.encoding === 'json' ? bytes.toString('utf8') : BYTES_MARK + bytes.toString('base64');
}

/**
 * What an event keeps in its slot, for stores that cut long text: an error cut as the history cuts it
 * (errorTail); a progress value or a result whole (each bounded where it is made).
 */
export function eventSlotText(type: QueueEventType, text: string | null | undefined): string | null {
  if (text === null || text === undefined) return null;
  return type === 'progress' || type === 'completed' ? text : errorTail(text);
}

/**
 * The event as readers get it. Stores keep a `progress` event's value, JSON text, and a `completed` event's
 * result (resultEventText) where other events keep their error (one slot in every store's layout); they are
 * handed out decoded, as `progress` and `result`.
 */
export function publicEvent(event: StoredEvent): StoredEvent {
  if (event.error === undefined) return event;
  if (event.type === 'progress') {
    const { error, ...rest } = event;
    return { ...rest, progress: JSON.parse(error) as unknown };
  }
  if (event.type === 'completed') {
    const { error, ...rest } = event;
    const result = eventResult(error);
    // A success's error text from a version of kvmq before results stays what it was.
    return result === undefined ? event : { ...rest, result: result.value };
  }
  return event;
}

function eventResult(text: string): { value: unknown } | undefined {
  if (text.startsWith(BYTES_MARK)) return { value: Buffer.from(text.slice(BYTES_MARK.length), 'base64') };
  try {
    return { value: JSON.parse(text) as unknown };
  } catch {
    return undefined;
  }
}
