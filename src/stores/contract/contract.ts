/**
 * The contract every store implements, in queue terms. The public API and the
 * worker speak only to this; each store maps it onto its own atomic tools
 * (SQLite transactions, ZooKeeper multi, etcd Txn, Redis Lua).
 *
 * Store-specific helpers are deliberately not part of it. Every method
 * resolves only after the store has applied the change.
 */
import type { StoredEvent } from '../../model/events.js';
import type { ChildFailurePolicy, FlowLink, FlowNode } from '../../model/flow.js';
import type { ListQuery } from '../../model/list.js';
import type { EncodedPayload, PayloadEncoding } from '../../model/payload.js';
import type { StoredLog } from '../../model/reports.js';
import type { MessageEdit } from '../../model/update.js';
import type {
  ActionResult,
  AttemptRecord,
  ConsumerInfo,
  EnqueueResult,
  FilterValues,
  GcResult,
  MessageStatus,
  Metadata,
  Outcome,
  QueueConfig,
  QueueStatus,
  SqlTransaction,
} from '../../model/types.js';

/** What a store can and cannot do, for callers and for tests named after a capability. */
export interface StoreCapabilities {
  /** Largest payload the store accepts, in bytes. */
  readonly maxPayloadBytes: number;
  /** The store tells idle workers about new messages (no polling needed). */
  readonly wakeups: boolean;
  /** A dead consumer's claims are freed at once (ephemeral node, lease), not at lock expiry. */
  readonly instantRelease: boolean;
  /** A failed message can move to another queue atomically (`deadLetterQueue`); not across Redis Cluster slots. */
  readonly deadLetterQueue: boolean;
  /**
   * A claim made while the consumer's finishes travel sees them applied (one connection or one thread applies
   * them in order), and a finish claims nothing by itself: the worker sends its next claim with its finishes.
   * Otherwise (ZooKeeper's finish claims for the consumer; etcd's dispatcher is a separate path) the worker
   * claims once its finishes are stored.
   */
  readonly claimWithFinishes: boolean;
  /**
   * With `claimWithFinishes`: the store works on a claim while the client runs the last answer's handlers (a
   * server across the network). A worker with a backlog whose handlers return within a round trip then sends the
   * next claim, for as many messages, as an answer arrives, before that answer's handlers start. Otherwise a claim
   * goes out once slots are free: an in-process store's claim would only delay the handlers, and ZooKeeper and
   * etcd claim once the finishes are stored.
   */
  readonly overlapClaims: boolean;
  /**
   * The store commits a consumer's concurrent finish calls together itself (group commit), each answered as soon
   * as it is stored, so the worker hands over each finish as it comes. Absent: false (the worker gathers a
   * tick's finishes into one store call, answered when all of it is stored).
   */
  readonly groupCommit?: boolean;
  /** The store writes flows (`Store.flow`, `Store.flowTree`); `client.flow` refuses them otherwise. */
  readonly flows: boolean;
  /**
   * The client sends a tick's enqueues in calls of this many messages (a caller's messages are never split),
   * each as soon as it is full, so a store whose calls pipeline on one connection applies one call while the
   * client prepares the next. Absent: one call per tick (a store that wants one transaction per tick).
   */
  readonly enqueueCallMessages?: number;
}

/** A message as the API hands it to a store: validated and encoded. */
export interface NewMessage {
  readonly id: string;
  readonly payload: Uint8Array;
  readonly encoding: PayloadEncoding;
  readonly metadata: Metadata;
  readonly filters: FilterValues;
  /** Canonical filter class (see model/filters.ts), the index key of pending messages. */
  readonly filterClass: string;
  readonly initialBackoffMs: number;
  readonly allowRequeue: boolean;
  readonly replacePayload: boolean;
  /** The message's own retry policy, encoded (model/policy.ts); null for none, and stores then write nothing. */
  readonly policy: string | null;
  /**
   * 0 (runs first) to PRIORITY_MAX (model/scheduling.ts). A claim takes the lowest priority number first among
   * the classes it accepts, oldest ready first within one, and never scans lower-priority messages to do so:
   * pending messages are indexed by priority in each store's layout.
   */
  readonly priority: number;
  /**
   * Ready at once (initialBackoffMs 0, no debounce id) and taken before every message of its priority enqueued
   * without it, the newest such first. A retry or an expired lock puts it back in line as any other message.
   */
  readonly lifo: boolean;
  /** At most the queue's `groupConcurrency` messages of one group are held (locked) at once; null: no group. */
  readonly group: string | null;
  /**
   * When set, and a message with this debounce id is still waiting (`queued` or `queued-with-backoff`),
   * that message takes this one's payload, encoding and metadata and becomes ready `initialBackoffMs`
   * (= debounce ms) from now; its id, filters, priority, group and policy stay. The result is
   * `{ ok: true, id: <the waiting message's id>, action: 'debounced' }`. Otherwise the message is added
   * as usual and becomes the waiting one for this debounce id. Checked and written in one atomic step.
   */
  readonly debounceId: string | null;
}

export interface ClaimRequest {
  readonly consumerId: string;
  /** Take at most this many messages. */
  readonly max: number;
  readonly lockMs: number;
  /** Filter classes this consumer accepts; null accepts every class. */
  readonly accepts: ((filterClass: string) => boolean) | null;
  /** Queue-wide backoff after the n-th dry run in a row (n ≥ 1). */
  readonly eoqBackoffMs: (dryRuns: number) => number;
}

export interface ClaimedMessage {
  readonly id: string;
  readonly payload: Uint8Array;
  readonly encoding: PayloadEncoding;
  readonly metadata: Metadata;
  readonly filters: FilterValues;
  readonly attempt: number;
  /** The policy stored with the message, as enqueued (null for none). */
  readonly policy: string | null;
  /**
   * How long the message's lock lasts at least, in ms by the store's clock, counted from when the request that
   * locked it was sent: the `claim` call, or for a handoff the `since` its listener is told. The store takes the
   * message from this consumer no sooner. 0 or less: it ended already. A store whose lock was set before that
   * request (a delivery or handoff made earlier) subtracts the time since. The worker stops the message's handler
   * when this passes without an acknowledged renewal (see Store.claimsHeldUntil for locks a session holds).
   */
  readonly lockLeftMs: number;
}

/** What a consumer hears of its handoffs (Store.receiveHandoffs). */
export interface HandoffListener {
  /**
   * Messages handed over, as a claim's would be, with the queue's size then (the dry runs are 0). `since`: a
   * performance.now() taken no later than the store started their locks, from which their `lockLeftMs` count.
   */
  delivered(messages: readonly ClaimedMessage[], queueSize: number, since: number): void;
  /**
   * Handoffs can start now (its connection is ready, at first and after each reconnect): the consumer's next
   * claim can park it, so a waiting consumer claims again.
   */
  ready(): void;
  /** Something failed on the way (data kvmq did not write); the receiving goes on. */
  failed(error: unknown): void;
}

/** Handoffs to one consumer (Store.receiveHandoffs). */
export interface HandoffReceiver {
  /** Ends them; resolves once every message handed over is delivered (the consumer gives back what it will not run). */
  close(): Promise<void>;
}

export interface ClaimResult {
  readonly messages: readonly ClaimedMessage[];
  /** Messages waiting or held (not finished), for monitors. */
  readonly queueSize: number;
  /** Dry runs in a row, queue-wide (Carmine's ndry-runs). */
  readonly dryRuns: number;
  /**
   * When nothing was claimed: the time (ms since the epoch) at which polling
   * again is worthwhile even without a wake-up (a backoff or lock ends, or the
   * queue-wide end-of-queue backoff ends). When messages were claimed: null
   * (claim again at once), or, from a store that knows it took every ready
   * message (fewer than `max`), that time too, so the worker waits for a
   * wake-up instead of making a claim that would find nothing.
   */
  readonly wakeAt: number | null;
}

export interface Finish {
  readonly id: string;
  /** The attempt the consumer was handed; a finish for an older attempt is refused. */
  readonly attempt: number;
  readonly outcome: Outcome;
  readonly backoffMs: number;
  readonly error: string | null;
  /**
   * When the handler started, on the worker's clock: the history record's `startedAt`.
   * Null for a message handed back unrun (a stop's give-back): stores record no history for it.
   */
  readonly startedAt: number | null;
  /**
   * A success's result (model/result.ts: at most RESULT_MAX_BYTES), written in the same atomic write as the
   * outcome; absent for none, and then the store writes nothing more than before. A message's result is its
   * current run's: a store clears it when the message runs anew (requeued, revived by an enqueue).
   */
  readonly result?: EncodedPayload;
}

/**
 * What a handler reported on a held message since the last report (`job.progress`, `job.log`), coalesced by the
 * worker. Written only while the consumer holds that attempt; otherwise `lost`, and nothing is written.
 */
export interface Report {
  readonly id: string;
  readonly attempt: number;
  /** The latest progress, JSON text (model/reports.ts encodeProgress); null leaves the stored one. */
  readonly progress: string | null;
  /** Log lines to append, oldest first, each within LOG_LINE_MAX_BYTES; the store keeps the log bounded (appendLog). */
  readonly lines: readonly string[];
}

/** A message's reports as stored: its latest progress (JSON text, null for none) and its log. */
export interface StoredReport {
  readonly progress: string | null;
  readonly log: StoredLog;
}

/** A message's content as stored. */
export interface StoredContent {
  readonly payload: Uint8Array;
  readonly encoding: PayloadEncoding;
  readonly metadata: Metadata;
  readonly filters: FilterValues;
}

export interface StoredListing {
  readonly status: MessageStatus;
  /** Present when the listing asked for payloads. */
  readonly content: StoredContent | null;
  /** The latest progress a handler reported, JSON text, or null; absent from a store that keeps none. */
  readonly progress?: string | null;
}

export interface StoredPage {
  readonly messages: readonly StoredListing[];
  /** The position after this page (made with model/list.ts makeCursor), or null when there is no more. */
  readonly cursor: string | null;
}

export interface StoredDetails {
  readonly status: MessageStatus;
  readonly content: StoredContent;
  readonly policy: string | null;
  readonly priority: number;
  readonly group: string | null;
  readonly history: readonly AttemptRecord[];
  /** Its progress and log; absent from a store that keeps none (`Store.report` absent). */
  readonly report?: StoredReport;
}

export interface Configured {
  readonly config: QueueConfig;
  /** The queue had no stored configuration before this call. */
  readonly created: boolean;
}

/** `lost`: the consumer no longer holds the message (lock expired and taken, or cleared). */
/** A finish before the worker stamps it with the handler's start time. */
export type AttemptFinish = Omit<Finish, 'startedAt'>;

export type FinishResult = 'ok' | 'lost';

/** A message a consumer holds: its id and the attempt it runs (what `extend` renews). */
export interface HeldAttempt {
  readonly id: string;
  readonly attempt: number;
}

export interface ConsumerRegistration {
  readonly id: string;
  readonly host: string;
  readonly pid: number;
  /** The registration lapses unless renewed within this time. */
  readonly ttlMs: number;
}

/**
 * A repeatable schedule as a store keeps it. The body is made and read by src/schedule/ only;
 * stores keep it as an opaque string.
 */
export interface StoredSchedule {
  /** Unique within the queue (model/scheduling.ts checkScheduleName). */
  readonly name: string;
  /** The schedule as JSON: its timing, payload and enqueue options. */
  readonly body: string;
  /** The next slot not yet enqueued, ms since the epoch: the value `fireSchedule` compares and sets. */
  readonly nextAt: number;
}

/** A page of a queue's events, oldest first. */
export interface EventPage {
  readonly events: readonly StoredEvent[];
  /**
   * Events after the cursor asked for were trimmed (past `eventsMaxCount` or `eventsMaxAgeMs`) before this read:
   * the page starts later than asked, and the reader must be told.
   */
  readonly missed: boolean;
  /** Where the next read starts: the last event's cursor, or the cursor asked for when there were none. */
  readonly cursor: string;
}

/** A transaction a store opened for a handler: the handler's writes and the message's finish commit together. */
export interface HandlerTransaction {
  /** The connection inside the transaction, handed to the handler as `job.tx`. */
  readonly tx: SqlTransaction;
  /**
   * Writes the finish in the transaction and commits it; `lost` (the consumer no longer holds that attempt) rolls
   * it all back instead. A failure rolls back too, and rejects.
   */
  commit(queue: string, consumerId: string, finish: Finish): Promise<FinishResult>;
  /** Rolls back, unless the transaction has already ended. */
  rollback(): Promise<void>;
}

/** One message of a flow as the client hands it to a store (Store.flow): every parent before its children. */
export interface FlowMessage {
  readonly queue: string;
  readonly message: NewMessage;
  /** Its parent's index in the flow's list; null for the root. */
  readonly parent: number | null;
  /** How many children it waits for: with any, it is written `waiting-children`; else as an enqueue would. */
  readonly children: number;
  /** What its final failure does to its parent. */
  readonly onChildFailure: ChildFailurePolicy;
  /**
   * Messages already enqueued that become its children too (not counted in `children`). Each is linked in the
   * flow's atomic write: one not ended owes it a count, one that succeeded owes nothing, one that failed owes
   * nothing under `ignore` and refuses the flow otherwise; one missing or with a parent refuses it
   * (FlowRefusedError with that `reason`), nothing written.
   */
  readonly dependsOn: readonly FlowLink[];
}

/** A held message that was canceled, as `subscribeCancels` tells it. */
export interface CanceledMessage {
  readonly id: string;
  readonly attempt: number;
}

export interface Store {
  readonly kind: string;
  readonly capabilities: StoreCapabilities;

  enqueue(queue: string, messages: readonly NewMessage[]): Promise<EnqueueResult[]>;
  /**
   * Optional: as `enqueue`, but one answer per message, each settled as soon as that message is stored (a store
   * that commits in groups answers a batch one group at a time). The client then sends a tick's enqueue calls
   * as one such call and resumes each caller with its own messages.
   */
  enqueueEach?(queue: string, messages: readonly NewMessage[]): Promise<EnqueueResult>[];
  /**
   * Optional, for a store in a SQL database (PostgreSQL): as `enqueue`, but inside the caller's open transaction
   * `tx`, so the messages exist, and wake workers, only if it commits. Rejects with TransactionError when `tx`
   * is not open or is aborted. Absent: the store cannot take part in a caller's transaction.
   */
  enqueueIn?(tx: SqlTransaction, queue: string, messages: readonly NewMessage[]): Promise<EnqueueResult[]>;
  /**
   * Optional, with `enqueueIn`: opens a transaction for a handler (worker option `transactional`), which the
   * worker ends with the message's finish (`commit`) or a `rollback`.
   */
  beginHandlerTransaction?(): Promise<HandlerTransaction>;
  /**
   * Optional, with `capabilities.flows`: writes a flow's messages in one atomic write, every one or none. A
   * message whose id exists in its queue refuses the whole flow with FlowRefusedError, nothing written. A child
   * counts for its parent until its final end (success, final failure, dead-lettered, canceled, expired,
   * removed), and the parent's count changes in the atomic write of that end; at 0 the parent is queued, and a
   * child's final failure applies its `onChildFailure` there too.
   */
  flow?(messages: readonly FlowMessage[]): Promise<void>;
  /** Optional, with `flow`: the whole tree of the flow the message belongs to, from its root; null when it is gone. */
  flowTree?(queue: string, id: string): Promise<FlowNode | null>;
  /** Optional, with `flow`: the statuses of a message's children (`job.children()`), in the order written. */
  flowChildren?(queue: string, id: string): Promise<MessageStatus[]>;
  claim(queue: string, request: ClaimRequest): Promise<ClaimResult>;
  /** Extends the locks of held messages; returns the ids no longer held by this consumer. */
  extend(queue: string, consumerId: string, held: readonly HeldAttempt[], lockMs: number): Promise<string[]>;
  finish(queue: string, consumerId: string, finishes: readonly Finish[]): Promise<FinishResult[]>;
  /**
   * Optional: stores what handlers reported (progress, log lines) on messages this consumer holds, each in one
   * atomic write with a `progress` queue event when it sets progress (the JSON text as the event's `error`). One
   * answer per report: `lost` when the consumer no longer holds that attempt (nothing written, so a late report
   * never touches a finished or re-delivered message). Absent: `job.progress` and `job.log` are unavailable.
   */
  report?(queue: string, consumerId: string, reports: readonly Report[]): Promise<FinishResult[]>;

  /** Every queue that has a configuration or messages, sorted by name. */
  queues(): Promise<string[]>;
  status(queue: string, id: string): Promise<MessageStatus | null>;
  /** Counts per state from counters kept with each state change: the cost is O(states), not O(messages). */
  queueStatus(queue: string): Promise<QueueStatus>;
  /** A page of messages in the query's states, from an index: the cost follows the page, not the queue. */
  list(queue: string, query: ListQuery): Promise<StoredPage>;
  /** Everything kept about one message, or null once it is gone. */
  inspect(queue: string, id: string): Promise<StoredDetails | null>;

  /** `failed` → `queued` at attempt 0 (the next delivery is attempt 1), history kept; each id atomically. */
  retry(queue: string, ids: readonly string[]): Promise<ActionResult[]>;
  /** Redrives up to `max` failed messages (oldest failure first) in one atomic step; returns how many. */
  retryFailed(queue: string, max: number): Promise<number>;
  /** Removes messages in any state but `locked` and `locked-with-requeue`. */
  remove(queue: string, ids: readonly string[]): Promise<ActionResult[]>;
  /**
   * Cancels a message that has not finished (model/cancel.ts CANCELABLE_STATES), in one atomic write:
   * it fails with `error` (its event `failed`, its failure counted), or moves to the dead-letter queue as a final
   * failure would. A held one is no longer its holder's (that holder's finish, extend and report are `lost`), and
   * the holder is told at once through `subscribeCancels`. `ok` with the state after (null once moved to the
   * dead-letter queue); refused with its state (null: no such message), nothing written.
   */
  cancel(queue: string, id: string, error: string): Promise<ActionResult>;
  /**
   * Calls `listener` when a held message of the queue was canceled, by the store's own
   * notification: with its id and attempt, or with null when the store tells only that one may have been (the
   * worker then renews at once, and hears of it as a lost lock). Returns the unsubscribe.
   */
  subscribeCancels(queue: string, listener: (canceled: CanceledMessage | null) => void): () => void;
  /**
   * Changes a waiting message (model/update.ts UPDATABLE_STATES) in one atomic write, against a claim:
   * either the claim takes the old content and the edit is refused, or the edit is stored and a later claim takes
   * the new. Its id, attempt, history and enqueue time stay; a new ready time makes it queued or delayed, a new
   * priority or filter class re-indexes it; with events on, an `updated` event. `ok` with its state after;
   * refused with its state (null: no such message; `locked` for one whose lock ended but is still held),
   * nothing written.
   */
  update(queue: string, id: string, edit: MessageEdit): Promise<ActionResult>;
  /** Ends a backoff now: `queued-with-backoff` or `done-with-requeue` → `queued`. */
  promote(queue: string, ids: readonly string[]): Promise<ActionResult[]>;
  /** Removes every message and the dry-run count of each queue; configuration stays. */
  clear(queues: readonly string[]): Promise<void>;

  config(queue: string): Promise<QueueConfig>;
  /** Merges the patch into the stored configuration (creating it); `paused` stops claims within one wake-up. */
  configure(queue: string, patch: Partial<QueueConfig>): Promise<Configured>;
  /**
   * Removes finished messages past the queue's GC lifetime (`failedLifetimeMs` for failed ones), and lapsed consumers.
   * One GC at a time per queue; unless `force`, only when the stored interval has passed.
   */
  gc(queue: string, force: boolean): Promise<GcResult>;

  registerConsumer(queue: string, consumer: ConsumerRegistration): Promise<void>;
  unregisterConsumer(queue: string, consumerId: string): Promise<void>;
  consumers(queue: string): Promise<ConsumerInfo[]>;

  /**
   * The queue's events after `after` (null: from the oldest kept), oldest first, at most `limit`.
   * Events exist only while the queue's configuration has `events: true`; each is written in the same
   * atomic write as its transition, and trimmed by count and age (see QueueConfig).
   */
  readEvents(queue: string, after: string | null, limit: number): Promise<EventPage>;
  /** The cursor of the newest event now: reading after it returns only events written later. */
  eventsHead(queue: string): Promise<string>;
  /**
   * Calls `listener` when new events may have been written to the queue (the store's own notification
   * where it has one, else a poll). Spurious calls are allowed; missed ones are not. Returns the unsubscribe.
   */
  subscribeEvents(queue: string, listener: () => void): () => void;

  /**
   * Takes the turn named `name` on the queue: true for at most one caller, across every process sharing
   * the store, per `everyMs` (checked and written in one atomic step); false when another took it within
   * `everyMs`. A rate limit kept in the store (e.g. one warning per six hours across all workers).
   */
  takeTurn(queue: string, name: string, everyMs: number): Promise<boolean>;

  /** Creates or replaces the schedule of that name (body and next slot); true when it was created. */
  putSchedule(queue: string, schedule: StoredSchedule): Promise<boolean>;
  /** The queue's schedules, sorted by name. */
  schedules(queue: string): Promise<StoredSchedule[]>;
  /** Removes a schedule; false when there was none. Messages it already enqueued stay. */
  removeSchedule(queue: string, name: string): Promise<boolean>;
  /**
   * Fires a schedule's due slots, in one atomic step: when the stored schedule `expected.name` still has
   * `expected.body` and `expected.nextAt`, sets its nextAt to `nextAt` and enqueues `messages` exactly as
   * `enqueue` would (a message whose id exists is refused in its result, not an error). Returns the enqueue
   * results; null when the schedule changed, was removed or another process fired it first, and then
   * nothing was written. This compare-and-set is what makes every slot enqueued once across processes.
   */
  fireSchedule(
    queue: string,
    expected: StoredSchedule,
    nextAt: number,
    messages: readonly NewMessage[],
  ): Promise<EnqueueResult[] | null>;

  /**
   * Calls `listener` when messages may have become available on the queue.
   * Spurious calls are allowed; missed ones are not. Returns the unsubscribe.
   */
  subscribe(queue: string, listener: () => void): () => void;

  /**
   * Optional: messages the store claims for this consumer while it waits with free slots (an enqueue hands
   * them over directly, skipping the wake-up and the claim), told to `listener`. The consumer's claims say
   * whether it takes them; a store that has it decides when.
   */
  receiveHandoffs?(queue: string, consumerId: string, listener: HandoffListener): HandoffReceiver;

  /**
   * Optional, for a store whose claims also end with a session (a ZooKeeper session, an etcd lease): the
   * performance.now() before which the server cannot have ended that session, from the send time of the last
   * acknowledged keep-alive plus the session's timeout (-Infinity while there is none). A worker treats every
   * message it holds as lost once this passes. Absent: claims end only with their locks (`lockLeftMs`).
   */
  claimsHeldUntil?(): number;

  close(): Promise<void>;
}
