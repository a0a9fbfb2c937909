/**
 * The store-independent model of a kvmq message: its states, the handler's
 * outcomes and the shapes the public API returns. Every store gives exactly
 * these semantics.
 */

/** A message's state, as Carmine names them. */
export type MessageState =
  | 'queued'
  | 'queued-with-backoff'
  | 'locked'
  | 'locked-with-requeue'
  | 'done-awaiting-gc'
  | 'done-with-backoff'
  | 'done-with-requeue';

export const MESSAGE_STATES: readonly MessageState[] = [
  'queued',
  'queued-with-backoff',
  'locked',
  'locked-with-requeue',
  'done-awaiting-gc',
  'done-with-backoff',
  'done-with-requeue',
];

/** What a handler decided. `retry` queues the message again (after `backoffMs`). */
export type Outcome = 'success' | 'error' | 'retry';

/** A JSON-encodable value, or raw bytes. */
export type Payload = unknown;

/** Filter name → value, e.g. `{ performance_class: 'standard' }`. */
export type FilterValues = Readonly<Record<string, string>>;

/** Free-form JSON object carried with a message. */
export type Metadata = Readonly<Record<string, unknown>>;

export interface EnqueueOptions {
  /** The message id. Give your own (a hash, say) to refuse duplicates; a random one otherwise. */
  readonly id?: string;
  /** Values for the queue's configured filter enums. */
  readonly filters?: FilterValues;
  readonly metadata?: Metadata;
  /** Keep the message back this long before a worker may take it. @defaultValue 0 */
  readonly initialBackoffMs?: number;
  /**
   * When the id exists and is `locked` or `done-with-backoff`, mark it to be
   * queued again (once) instead of refusing. @defaultValue false
   */
  readonly allowRequeue?: boolean;
  /** With `allowRequeue`: the requeued run carries this payload, not the old one. @defaultValue false */
  readonly replacePayload?: boolean;
}

export interface BatchItem extends EnqueueOptions {
  readonly payload: Payload;
}

/** How an accepted enqueue changed the queue. */
export type EnqueueAction = 'added' | 'revived' | 'requeued';

export type EnqueueResult =
  | { readonly ok: true; readonly id: string; readonly action: EnqueueAction }
  /** Refused: a message with this id exists; `state` is its current state. */
  | { readonly ok: false; readonly id: string; readonly state: MessageState };

/** One message as a handler sees it. */
export interface Job {
  readonly queue: string;
  readonly id: string;
  readonly payload: Payload;
  readonly metadata: Metadata;
  readonly filters: FilterValues;
  /** 1 on the first delivery, +1 on every redelivery (retry, expired lock). */
  readonly attempt: number;
  /** Aborted when the worker loses the message's lock or is stopped forcefully. */
  readonly signal: AbortSignal;
}

export interface HandlerResult {
  readonly status: Outcome;
  /** After `retry`: wait this long. After `success`/`error`: refuse duplicates this long. */
  readonly backoffMs?: number;
  /** Recorded as the message's last error. */
  readonly error?: string;
}

/** Returning nothing counts as `success`; throwing counts as `error` (or a retry, see `maxAttempts`). */
export type Handler = (job: Job) => Promise<HandlerResult | void> | HandlerResult | void;

export interface MessageStatus {
  readonly queue: string;
  readonly id: string;
  readonly state: MessageState;
  /** How many times the message has been handed to a handler. */
  readonly attempt: number;
  /** The last handler outcome, or null before the first one. */
  readonly outcome: Outcome | null;
  readonly lastError: string | null;
  readonly enqueuedAt: number;
  readonly updatedAt: number;
  /** The consumer holding the message while locked. */
  readonly consumer: string | null;
  /** When a lock or backoff ends (ms since the epoch), or null. */
  readonly until: number | null;
}

export interface ConsumerInfo {
  readonly id: string;
  readonly host: string;
  readonly pid: number;
  readonly startedAt: number;
  readonly lastSeenAt: number;
  /** Ids of the messages it holds now. */
  readonly holding: readonly string[];
}

export interface QueueStatus {
  readonly queue: string;
  readonly counts: Readonly<Record<MessageState, number>>;
  readonly total: number;
  /** Live consumers and what each holds. */
  readonly consumers: readonly ConsumerInfo[];
  /** Times workers found nothing to do since the last message was handled. */
  readonly dryRuns: number;
}

/** A queue's configuration, stored in the store itself. */
export interface QueueConfig {
  /** Finished messages older than this are removed by GC. */
  readonly gcLifetimeMs: number;
  /** GC runs at most this often per queue. */
  readonly gcIntervalMs: number;
  /** Ordered enums per filter name, lowest first. */
  readonly filterEnums: Readonly<Record<string, readonly string[]>>;
}

export interface GcResult {
  /** False when another GC held the queue's lock (or, unforced, the interval had not passed). */
  readonly ran: boolean;
  /** Finished messages removed. */
  readonly removed: number;
}
