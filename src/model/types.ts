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
  | 'done-with-requeue'
  /**
   * Finished with a final error (returned, thrown with no attempts left, timed
   * out, lost its lock `maxDeliveries` times, or not takeable). Kept apart from
   * successes for the queue's `failedLifetimeMs`; refuses its id until retried or removed.
   */
  | 'failed'
  /**
   * A flow's parent (`client.flow`) waiting until every one of its children has ended; then it is `queued`. Not
   * takeable meanwhile; a cancel fails it and cancels its waiting children.
   */
  | 'waiting-children';

export const MESSAGE_STATES: readonly MessageState[] = [
  'queued',
  'queued-with-backoff',
  'locked',
  'locked-with-requeue',
  'done-awaiting-gc',
  'done-with-backoff',
  'done-with-requeue',
  'failed',
  'waiting-children',
];

/** What a handler decided. `retry` queues the message again (after `backoffMs`). */
export type Outcome = 'success' | 'error' | 'retry';

/** A JSON-encodable value, or raw bytes. */
export type Payload = unknown;

/** Filter name → value, e.g. `{ performance_class: 'standard' }`. */
export type FilterValues = Readonly<Record<string, string>>;

/** Free-form JSON object carried with a message. */
export type Metadata = Readonly<Record<string, unknown>>;

/**
 * An open SQL transaction of the caller's on the PostgreSQL store's database: a `pg` Client or PoolClient
 * inside BEGIN, or any object that runs one statement with `$1`-style parameters in that transaction (a query
 * builder's transaction behind a one-line adapter; `knexTransaction` for Knex). kvmq sends its statements
 * through it and never commits or rolls it back.
 */
export interface SqlTransaction {
  query(text: string, values: unknown[]): Promise<{ readonly rows: readonly unknown[] }>;
}

export interface EnqueueOptions {
  /**
   * Enqueue inside this transaction of yours (PostgreSQL only): the message exists, and workers are woken,
   * only if it commits. Any other store refuses it with a TypeError.
   */
  readonly tx?: SqlTransaction;
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
  /** This message's attempts: a thrown error is retried until this attempt. Overrides the worker's `maxAttempts`. */
  readonly attempts?: number;
  /** This message's backoff before such a retry. Overrides the worker's `retryBackoffMs`. */
  readonly backoff?: BackoffPolicy;
  /** This message's handler time limit. Overrides the worker's `timeoutMs`. */
  readonly timeoutMs?: number;
  /**
   * Lower numbers run first: 0 (the default, and the highest) to 1000. Strictly by priority across the
   * queue's messages a worker accepts, first in first out within one priority.
   */
  readonly priority?: number;
  /**
   * Take this message newest first within its priority: it runs before the messages of its priority enqueued
   * without `lifo`, and before the `lifo` ones enqueued earlier. Only for a message ready at once: not with
   * `initialBackoffMs`, `runAt` or `debounce`. A retry puts it back in line as any other. @defaultValue false
   */
  readonly lifo?: boolean;
  /** Run no earlier than this time (a Date or ms since the epoch). Not with `initialBackoffMs` or `debounce`. */
  readonly runAt?: Date | number;
  /**
   * The message's time to live, from this enqueue: one not started by a handler within it fails with the error
   * `expired` (a `failed` event, counted as a failure, dead-lettered where the queue says so), whether a worker
   * claims it (its handler is not called) or the queue's GC finds it waiting. Longer than any delay
   * (`initialBackoffMs`, `runAt`, `debounce.ms`). @defaultValue none: the message waits as long as it takes
   */
  readonly expireAfterMs?: number;
  /** The message's group: at most the queue's `groupConcurrency` messages of one group are held at once. */
  readonly group?: string;
  /**
   * A message with the same debounce `id` still waiting (`queued` or `queued-with-backoff`) is replaced
   * (payload, metadata, ready time) instead of a new one being added; the message runs `ms` after the
   * last such enqueue. Not with `initialBackoffMs` or `runAt`.
   */
  readonly debounce?: { readonly id: string; readonly ms: number };
}

/**
 * A retry backoff carried by a message: a fixed number of milliseconds, or
 * `{ type: 'exponential', delayMs }`, which waits delayMs × 2^(attempt - 1).
 */
export type BackoffPolicy = number | { readonly type: 'fixed' | 'exponential'; readonly delayMs: number };

/** A message's own retry policy, as stored with it; absent fields fall back to the worker's options. */
export interface MessagePolicy {
  readonly attempts?: number;
  readonly backoff?: BackoffPolicy;
  readonly timeoutMs?: number;
  /**
   * The deadline (ms since the epoch) by which a handler must have started the message, set from the enqueue's
   * `expireAfterMs`; past it the message fails with the error `expired` instead of running.
   */
  readonly expireAt?: number;
}

/** One message of `enqueueBatch`: its payload and options (the transaction is the call's, not an item's). */
export interface BatchItem extends Omit<EnqueueOptions, 'tx'> {
  readonly payload: Payload;
}

export interface EnqueueBatchOptions {
  /** Enqueue every item inside this transaction of yours, as `EnqueueOptions.tx`. */
  readonly tx?: SqlTransaction;
}

/**
 * How an accepted enqueue changed the queue. `debounced`: a waiting message with the same debounce id
 * took this payload and ready time; the result's `id` is that message's.
 */
export type EnqueueAction = 'added' | 'revived' | 'requeued' | 'debounced';

export type EnqueueResult =
  | { readonly ok: true; readonly id: string; readonly action: EnqueueAction }
  /** Refused: a message with this id exists; `state` is its current state. */
  | { readonly ok: false; readonly id: string; readonly state: MessageState };

/** One message as a handler sees it; `P` is the payload's type (`client.queue<P, R>()` or `worker<P, R>()`). */
export interface Job<P = Payload> {
  readonly queue: string;
  readonly id: string;
  readonly payload: P;
  readonly metadata: Metadata;
  readonly filters: FilterValues;
  /** 1 on the first delivery, +1 on every redelivery (retry, expired lock). */
  readonly attempt: number;
  /** Aborted when the worker loses the message's lock or is stopped forcefully. */
  readonly signal: AbortSignal;
  /**
   * With the worker option `transactional` (PostgreSQL): the transaction the handler runs in, on a connection
   * inside BEGIN that kvmq commits with the message's outcome, or rolls back if the handler throws. Never
   * COMMIT or ROLLBACK it yourself; once it has ended (a timeout, a lost lock) its queries are refused with
   * TransactionError. Undefined on other workers.
   */
  readonly tx?: SqlTransaction;
  /**
   * Records the message's progress (a number or small JSON, at most PROGRESS_MAX_BYTES as JSON) and emits a
   * `progress` queue event. Writes are coalesced: at most one per REPORT_EVERY_MS per message reaches the store,
   * with the latest value, and the last is stored before the message's outcome. Returns false, recording nothing,
   * once the worker no longer holds the message (its lock was lost, it was stopped, or the handler has returned);
   * throws JobReportError for a value that is not JSON-encodable or too large. Bound: `({ progress }) => ...` works.
   */
  readonly progress: (value: unknown) => boolean;
  /**
   * Appends a line to the message's log (kept: the newest LOG_MAX_LINES lines within LOG_MAX_BYTES; older ones are
   * dropped and counted). A line over LOG_LINE_MAX_BYTES is cut, its end saying how much. Coalesced and flushed
   * with progress; returns false, as `progress` does, once the worker no longer holds the message.
   */
  readonly log: (line: string) => boolean;
  /**
   * A flow's parent reads its children's statuses (`client.flow`): state, outcome, lastError and `result`, in the
   * order they were written; none for a message without children. A child removed (or garbage-collected) is
   * absent. Bound as `progress` is. Rejects with a TypeError on a store without flows.
   */
  readonly children: () => Promise<MessageStatus[]>;
}

export interface HandlerResult<R = unknown> {
  readonly status: Outcome;
  /** After `retry`: wait this long. After `success`/`error`: refuse duplicates this long. */
  readonly backoffMs?: number;
  /** Recorded as the message's last error. */
  readonly error?: string;
  /**
   * With `success` only: kept with the message (JSON, or bytes as given; at most RESULT_MAX_BYTES encoded) and
   * returned by `status`, `inspect`, `list` and `waitFor`. Too large or not encodable: the attempt ends in `error`.
   */
  readonly result?: R;
}

/**
 * Returning nothing counts as `success` (no result); throwing counts as `error` (or a retry, see `maxAttempts`).
 * Any other value must be a HandlerResult: a bare value is not taken for a result.
 */
export type Handler<P = Payload, R = unknown> = (
  job: Job<P>,
) => Promise<HandlerResult<R> | void> | HandlerResult<R> | void;

/**
 * What a batch handler returns: one outcome for every message of the batch (a HandlerResult, or nothing: success),
 * or an array of exactly one outcome per message, in the batch's order (`undefined` in it: that one's success).
 */
export type BatchOutcome<R = unknown> = HandlerResult<R> | readonly (HandlerResult<R> | void)[] | void;

/**
 * A worker's handler with the option `batch`: up to `batch.size` messages at once, oldest claim first. Throwing
 * counts as a thrown error for each of them (retried per its attempts).
 */
export type BatchHandler<P = Payload, R = unknown> = (
  jobs: readonly Job<P>[],
) => Promise<BatchOutcome<R>> | BatchOutcome<R>;

export interface MessageStatus<R = unknown> {
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
  /**
   * What the handler of the message's current run returned as `result` with its success; absent when it
   * returned none (or the run has not succeeded). A requeued or revived message starts without one.
   */
  readonly result?: R;
}

/** One attempt that did not end in a plain success, or a delivery whose lock was lost. */
export interface AttemptRecord {
  readonly attempt: number;
  /** When the handler started (the worker's clock), or null when unknown (a lost lock). */
  readonly startedAt: number | null;
  /** When the store recorded the end of the attempt. */
  readonly endedAt: number;
  readonly consumer: string | null;
  /** `lost`: the consumer's lock ended (it died, stalled or was too slow) before any outcome. */
  readonly outcome: Outcome | 'lost';
  /** The error, cut to its first line and its end (see `errorTail`). */
  readonly error: string | null;
}

/** A listed message: its status, and its content (and result) when the listing asked for it. */
export interface ListedMessage extends MessageStatus {
  /** The latest progress a handler reported (`job.progress`); absent when there is none. */
  readonly progress?: unknown;
  readonly payload?: Payload;
  readonly metadata?: Metadata;
  readonly filters?: FilterValues;
}

/** Everything kvmq keeps about a message; `P` and `R` are its payload's and result's types. */
export interface MessageDetails<P = Payload, R = unknown> extends MessageStatus<R> {
  readonly payload: P;
  readonly metadata: Metadata;
  readonly filters: FilterValues;
  readonly policy: MessagePolicy;
  /** 0 (runs first) to 1000. */
  readonly priority: number;
  /** The message's group, or null. */
  readonly group: string | null;
  /** The newest attempts last; at most `HISTORY_LIMIT`. */
  readonly history: readonly AttemptRecord[];
  /** The last progress a handler reported (`job.progress`), or null. */
  readonly progress: unknown;
  /** The message's log (`job.log`), oldest line first, across its attempts. */
  readonly log: readonly string[];
  /** Older log lines dropped to keep the log within its limits. */
  readonly logDropped: number;
}

export interface ListOptions {
  /** One state to list. */
  readonly state?: MessageState;
  /** Several states to list (not with `state`). @defaultValue every state */
  readonly states?: readonly MessageState[];
  /** Only messages whose last outcome is this. */
  readonly outcome?: Outcome;
  /** Messages per page, 1 to 1000. @defaultValue 100 */
  readonly limit?: number;
  /** The `cursor` of the previous page of the same listing. */
  readonly cursor?: string;
  /** Include payload, metadata, filters and each message's `result`. @defaultValue false */
  readonly payload?: boolean;
}

export interface ListPage {
  readonly messages: readonly ListedMessage[];
  /** Pass it back for the next page; null on the last page. */
  readonly cursor: string | null;
}

/**
 * What an action (retry, remove, promote) did: `state` is the message's state
 * after it (null once removed), or, when refused, its current state (null when unknown).
 */
export type ActionResult =
  | { readonly ok: true; readonly id: string; readonly state: MessageState | null }
  | { readonly ok: false; readonly id: string; readonly state: MessageState | null };

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
  /** Workers claim nothing while the queue is paused. */
  readonly paused: boolean;
}

/** A queue's configuration, stored in the store itself. */
export interface QueueConfig {
  /** Finished messages (successes) older than this are removed by GC. */
  readonly gcLifetimeMs: number;
  /** Failed messages older than this are removed by GC. */
  readonly failedLifetimeMs: number;
  /**
   * GC also removes successes beyond the newest this many, however young; null: by age only. A success still
   * refusing duplicates (`backoffMs`) or waiting to be requeued stays until then.
   */
  readonly keepDone: number | null;
  /** GC also removes failed messages beyond the newest this many, however young; null: by age only. */
  readonly keepFailed: number | null;
  /** GC runs at most this often per queue. */
  readonly gcIntervalMs: number;
  /** Ordered enums per filter name, lowest first. */
  readonly filterEnums: Readonly<Record<string, readonly string[]>>;
  /** Workers claim nothing while true; enqueues are still accepted. */
  readonly paused: boolean;
  /** A message whose lock is lost this many times fails; 0 never fails it for that. */
  readonly maxDeliveries: number;
  /** Failed messages move to this queue (queued there, history kept) instead of staying failed here. */
  readonly deadLetterQueue: string | null;
  /** The store writes a queue event (model/events.ts) with each transition, read by `client.events()`. */
  readonly events: boolean;
  /** Events kept at most, newest kept; older ones are trimmed (a reader behind them is told). */
  readonly eventsMaxCount: number;
  /** Events older than this are trimmed. */
  readonly eventsMaxAgeMs: number;
  /** At most `max` messages claimed per `perMs` across every worker of the queue, kept in the store; null: no limit. */
  readonly rateLimit: RateLimit | null;
  /** At most this many messages of one `group` held at once across every worker; null: no limit. */
  readonly groupConcurrency: number | null;
  /**
   * At most `max` messages of one `group` start per `perMs` across every worker, kept in the store as
   * `rateLimit` is; messages without a group are not limited by it. null: no limit.
   */
  readonly groupRateLimit: RateLimit | null;
}

/** A queue's rate limit: `max` messages per `perMs` milliseconds. */
export interface RateLimit {
  readonly max: number;
  readonly perMs: number;
}

export interface GcResult {
  /** False when another GC held the queue's lock (or, unforced, the interval had not passed). */
  readonly ran: boolean;
  /** Finished and failed messages removed. */
  readonly removed: number;
}

/**
 * Why an attempt did not succeed: the handler said so, it threw, it ran past `timeoutMs`, it was canceled, or the
 * message's time to live (`expireAfterMs`) ended before it started (the handler was not called).
 */
export type FailureReason = 'handler' | 'thrown' | 'timeout' | 'canceled' | 'expired';
