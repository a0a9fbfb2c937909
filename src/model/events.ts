/**
 * Queue events: what happened to a queue's messages, written by the store in the
 * same atomic write as the transition itself, for queues configured with `events: true`.
 */

/** Every transition an event records. */
export const QUEUE_EVENT_TYPES = [
  'enqueued',
  'started',
  'completed',
  'failed',
  'retrying',
  'removed',
  'progress',
] as const;

/**
 * - `enqueued`: an enqueue stored the message (created, revived or marked for requeue), or `retry`/`retryFailed`
 *   queued a failed one again (attempt 0: the next delivery is attempt 1).
 * - `started`: a consumer claimed it (each delivery, including after a lost lock).
 * - `completed`, `retrying`, `failed`: a finish with that outcome was stored (`failed` also when `maxDeliveries`
 *   fails it at a claim, or a dead-letter move takes it away).
 * - `removed`: `remove` deleted it.
 * - `progress`: a handler's `job.progress(value)` was stored (coalesced: at most a few per second per message).
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
}

/** An event as a store returns it: with the position to read on from. */
export interface StoredEvent extends QueueEvent {
  /** Opaque, ordered only by the store that made it; pass it back to read what came after. */
  readonly cursor: string;
}

/** Default retention of a queue's events, per `eventsMaxCount` and `eventsMaxAgeMs`. */
export const EVENTS_MAX_COUNT = 10_000;

/**
 * The event as readers get it. Stores keep a `progress` event's value, JSON text, where other events keep their
 * error (one slot in every store's layout); it is handed out parsed, as `progress`.
 */
export function publicEvent(event: StoredEvent): StoredEvent {
  if (event.type !== 'progress' || event.error === undefined) return event;
  const { error, ...rest } = event;
  return { ...rest, progress: JSON.parse(error) as unknown };
}
