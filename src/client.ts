/**
 * The public API: a client bound to one store. It validates and encodes at the
 * boundary, then speaks only the store contract.
 */
import { bindStore } from './client-store.js';
import { ClosedError, MessageGoneError } from './errors.js';
import { checkCursorText, checkEventsOptions, checkWaitForOptions } from './events/options.js';
import type { EventsOptions, WaitForOptions } from './events/options.js';
import type { WaitResult } from './events/wait-for.js';
import { cancelError } from './model/cancel.js';
import { emptyEdit, type MessageEdit, type UpdateOptions } from './model/update.js';
import { DEFAULT_QUEUE_CONFIG, checkConfigPatch } from './model/config.js';
import { checkMessageFilters, filterClass } from './model/filters.js';
import { newMessageId } from './model/ids.js';
import {
  DEFAULT_PRIORITY,
  checkDebounce,
  checkGroup,
  checkPriority,
  checkRunAt,
  checkScheduleName,
  type Debounce,
} from './model/scheduling.js';
import { checkListOptions } from './model/list.js';
import { MESSAGE_STATES } from './model/types.js';
import { flowIds, flowSteps, type FlowIds, type FlowNode, type FlowTree } from './model/flow.js';
import { decodePayload, encodePayload } from './model/payload.js';
import { checkPolicy, decodePolicy, encodePolicy, withExpiry } from './model/policy.js';
import {
  checkBoolean,
  checkCount,
  checkKnownKeys,
  checkMessageId,
  checkMs,
  checkPlainObject,
  checkQueueName,
} from './model/validate.js';
import type { ScheduleInfo, ScheduleOptions } from './schedule/define.js';
import type { SharedSchedulers } from './schedule/shared.js';
import type { ScheduleTiming } from './schedule/timing.js';
import { openStore, resolveStoreUrl } from './store/url.js';
import { TickBatcher } from './tick-batcher.js';
import type { BatchWorkerOptions, Worker, WorkerOptions } from './worker/worker.js';
import { Queue } from './queue.js';
import { publicEvent, type StoredEvent } from './model/events.js';
import { EMPTY_LOG } from './model/reports.js';
import type { Configured, EventPage, NewMessage, Store, StoredContent, StoredReport } from './store/contract.js';
import type { MetricsOptions, MetricsRegistry } from './metrics/registry.js';
import type { WorkerMetrics } from './metrics/worker-metrics.js';
import type {
  ActionResult,
  BatchItem,
  EnqueueBatchOptions,
  EnqueueOptions,
  EnqueueResult,
  FilterValues,
  GcResult,
  BatchHandler,
  Handler,
  ListedMessage,
  ListOptions,
  ListPage,
  MessageDetails,
  MessageStatus,
  Metadata,
  Payload,
  QueueConfig,
  QueueStatus,
  SqlTransaction,
} from './model/types.js';

export interface ConnectOptions {
  /**
   * Producers run the queue's GC (at its stored interval) after enqueues, as
   * workers do. Turn off for short-lived producers that should do no upkeep.
   * @defaultValue true
   */
  readonly maintenance?: boolean;
  /** Called with errors of background work (producer GC). @defaultValue prints to stderr */
  readonly onError?: (error: unknown) => void;
}

// A message's own options, as an enqueue or a batch item gives them.
const MESSAGE_KEYS = [
  'id',
  'filters',
  'metadata',
  'initialBackoffMs',
  'allowRequeue',
  'replacePayload',
  'attempts',
  'backoff',
  'timeoutMs',
  'priority',
  'lifo',
  'runAt',
  'group',
  'debounce',
  'expireAfterMs',
] as const;
const ENQUEUE_KEYS = [...MESSAGE_KEYS, 'tx'] as const;
// What update changes of a waiting message.
const UPDATE_KEYS = ['payload', 'priority', 'runAt', 'delayMs', 'filters'] as const;
const BATCH_KEYS = ['payload', ...MESSAGE_KEYS] as const;
// The states of a store without flows.
const WITHOUT_FLOWS = MESSAGE_STATES.filter((state) => state !== 'waiting-children');
// Failed messages redriven per atomic step of retryFailed.
const REDRIVE_BATCH = 500;
// Filter enums change rarely; a short cache keeps enqueue from reading them every time.
const CONFIG_CACHE_MS = 1000;
/** What `show` says of a message on a store that keeps no reports. */
const NO_REPORT: StoredReport = { progress: null, log: EMPTY_LOG };

/** What pause() and resume() did. */
export interface PauseResult {
  readonly paused: boolean;
  /** The queue had nothing stored before: this call created its configuration. */
  readonly created: boolean;
}

/**
 * Opens a client on the store the URL names (default: $KVMQ_STORE, else
 * `sqlite:./kvmq.db`).
 */
export async function connect(url?: string, options: ConnectOptions = {}): Promise<Client> {
  checkKnownKeys('connect', checkPlainObject('options', options), ['maintenance', 'onError']);
  const resolved = resolveStoreUrl(url);
  const [store] = await Promise.all([openStore(resolved), loadWorkerModules(), loadSendTracing()]);
  return construct(resolved, store, options);
}

/**
 * @internal A client whose `worker()` may not be called (it throws): the CLI's commands that make no worker open
 * this one, so a `kvmq status` never loads the worker and the schedulers (a start-up cost of its own).
 */
export async function connectWithoutWorkers(url: string, options: ConnectOptions = {}): Promise<Client> {
  checkKnownKeys('connect', checkPlainObject('options', options), ['maintenance', 'onError']);
  return construct(url, await openStore(url), options);
}

/** The worker's and the schedulers' modules, loaded by connect() beside the store, so worker() stays synchronous. */
let workerModules: {
  readonly worker: typeof import('./worker/worker.js');
  readonly shared: typeof import('./schedule/shared.js');
} | null = null;

/** The producer's tracing, loaded by connect() or by a client without workers on its first enqueue. */
let sendTracing: typeof import('./tracing/send.js') | null = null;

async function loadSendTracing(): Promise<typeof import('./tracing/send.js')> {
  sendTracing ??= await import('./tracing/send.js');
  return sendTracing;
}

async function loadWorkerModules(): Promise<void> {
  if (workerModules !== null) return;
  const [worker, shared] = await Promise.all([import('./worker/worker.js'), import('./schedule/shared.js')]);
  workerModules = { worker, shared };
}

// The only way to build a Client; the constructor is private so its internal parameters stay out of the API.
let construct: (url: string, store: Store, options: ConnectOptions) => Client;

export class Client {
  readonly url: string;
  readonly #store: Store;
  private readonly maintenance: boolean;
  private readonly onError: (error: unknown) => void;
  private readonly configCache = new Map<string, { config: QueueConfig; readAt: number }>();
  private readonly lastGc = new Map<string, number>();
  private readonly workers = new Set<Worker>();
  /** One scheduler per queue, shared by the workers that fire schedules; made with the first worker. */
  private schedulers: SharedSchedulers | null = null;
  private readonly background = new Set<Promise<unknown>>();
  // Live event readers and waits, ended when the client closes.
  private readonly followers = new Set<AbortController>();
  private readonly enqueues: TickBatcher<NewMessage, EnqueueResult>;
  /** The workers' metrics, made on the first `metrics()` call; null until then, so workers measure nothing. */
  private instruments: WorkerMetrics | null = null;
  private workerMetrics: Promise<WorkerMetrics> | null = null;
  private closed = false;

  static {
    construct = (url, store, options) => new Client(url, store, options);
  }

  /** Use `connect()`. */
  private constructor(url: string, store: Store, options: ConnectOptions) {
    this.url = url;
    this.#store = store;
    bindStore(this, store);
    this.maintenance = options.maintenance === undefined ? true : checkBoolean('maintenance', options.maintenance);
    this.onError = options.onError ?? ((error) => console.error('kvmq:', error));
    // A store that answers each message on its own (group commit) resumes each caller with its own messages.
    this.enqueues = new TickBatcher(
      store.enqueueEach === undefined
        ? (queue, messages) => store.enqueue(queue, messages)
        : (queue, messages) => store.enqueueEach?.(queue, messages) ?? [],
      store.capabilities.enqueueCallMessages,
    );
  }

  /** Adds one message. Resolves once the store holds it. */
  async enqueue(queue: string, payload: Payload, options: EnqueueOptions = {}): Promise<EnqueueResult> {
    checkKnownKeys('enqueue', checkPlainObject('options', options), ENQUEUE_KEYS);
    this.checkOpen();
    checkQueueName(queue);
    // The batch path's work for one message, without the item object and arrays it would build.
    const config = options.filters === undefined ? null : await this.cachedConfig(queue);
    const message = this.prepare(queue, payload, options, config);
    const send = this.sender(queue, options.tx);
    const [result] = await (sendTracing ?? (await loadSendTracing())).traceSend(queue, [message], false, send);
    this.maybeGcInBackground(queue);
    if (result === undefined) throw new Error('store returned no result for an enqueue');
    return result;
  }

  /**
   * Adds many messages in as few store round trips as the store allows; results are in order.
   * Enqueues made in the same tick travel to the store together.
   */
  async enqueueBatch(
    queue: string,
    items: readonly BatchItem[],
    options: EnqueueBatchOptions = {},
  ): Promise<EnqueueResult[]> {
    this.checkOpen();
    checkQueueName(queue);
    checkKnownKeys('enqueueBatch', checkPlainObject('options', options), ['tx']);
    const send = this.sender(queue, options.tx);
    const list: unknown = items;
    if (!Array.isArray(list)) throw new TypeError('enqueueBatch takes an array of { payload, ...options }');
    const needsConfig = items.some((item) => item.filters !== undefined);
    const config = needsConfig ? await this.cachedConfig(queue) : null;
    const messages = items.map((item) => {
      checkKnownKeys('enqueue', checkPlainObject('message', item), BATCH_KEYS);
      return this.prepare(queue, item.payload, item, config);
    });
    const results = await (sendTracing ?? (await loadSendTracing())).traceSend(queue, messages, true, send);
    this.maybeGcInBackground(queue);
    return results;
  }

  /**
   * Writes a flow: the tree's messages, every one or none (FlowRefusedError when an id exists), each parent
   * `waiting-children` until its children have ended. Children may be in other queues. Resolves with the ids.
   */
  async flow(tree: FlowTree): Promise<FlowIds> {
    this.checkOpen();
    const steps = flowSteps(tree);
    const store = this.#store;
    if (!store.capabilities.flows || store.flow === undefined) {
      throw new TypeError(
        `flows are not available on this ${store.kind} store yet; use SQLite or Redis (not a cluster)`,
      );
    }
    const configs = new Map<string, QueueConfig>();
    for (const { queue, tree: node } of steps) {
      if (node.filters !== undefined && !configs.has(queue)) configs.set(queue, await this.cachedConfig(queue));
    }
    const messages = steps.map((step) => ({
      queue: step.queue,
      message: this.prepare(step.queue, step.tree.payload, step.tree, configs.get(step.queue) ?? null),
      parent: step.parent,
      children: step.children,
      onChildFailure: step.onChildFailure,
    }));
    const ids = new Set(messages.map(({ queue, message }) => `${queue}\n${message.id}`));
    if (ids.size < messages.length) throw new TypeError('a flow names one message (queue and id) twice');
    await store.flow(messages);
    return flowIds(
      steps,
      messages.map(({ message }) => message.id),
    );
  }

  /** The tree of the flow the message belongs to, from its root, each node with its status; null once it is gone. */
  async getFlow(queue: string, id: string): Promise<FlowNode | null> {
    this.checkOpen();
    const store = this.#store;
    checkQueueName(queue);
    checkMessageId(id);
    if (store.flowTree === undefined) {
      throw new TypeError(
        `flows are not available on this ${store.kind} store yet; use SQLite or Redis (not a cluster)`,
      );
    }
    return store.flowTree(queue, id);
  }

  /**
   * Where an enqueue's messages go: the tick's shared call, or, with `tx`, the caller's transaction on its own
   * (a transaction cannot be shared with other callers' messages). A store that cannot is a TypeError.
   */
  private sender(
    queue: string,
    tx: SqlTransaction | undefined,
  ): (messages: readonly NewMessage[]) => Promise<EnqueueResult[]> {
    if (tx === undefined) return (messages) => this.enqueues.add(queue, messages);
    const store = this.#store;
    if (typeof (tx as Partial<SqlTransaction> | null)?.query !== 'function') {
      throw new TypeError('tx must be an open transaction: a pg client inside BEGIN, or { query(text, values) }');
    }
    if (store.enqueueIn === undefined) {
      throw new TypeError(
        `tx is not available on this ${store.kind} store: only a PostgreSQL store (postgres://) can enqueue ` +
          "inside your database's transaction",
      );
    }
    return (messages) => store.enqueueIn?.(tx, queue, messages) ?? Promise.resolve([]);
  }

  /**
   * The queue `name` with its payload's type `P` and its handlers' result type `R`: enqueue, worker, waitFor,
   * status and show typed end to end. The types are not checked at run time.
   */
  queue<P = Payload, R = unknown>(name: string): Queue<P, R> {
    return new Queue<P, R>(this, checkQueueName(name));
  }

  /**
   * Starts (unless `autoStart: false`) a worker that hands the queue's messages to `handler`; with the option
   * `batch`, up to `batch.size` of them to each call of a BatchHandler.
   */
  worker<P = Payload, R = unknown>(
    queue: string,
    handler: BatchHandler<NoInfer<P>, NoInfer<R>>,
    options: BatchWorkerOptions,
  ): Worker;
  worker<P = Payload, R = unknown>(
    queue: string,
    // Given, not inferred from the handler: a handler's several returns would pick one of them.
    handler: Handler<NoInfer<P>, NoInfer<R>>,
    options?: WorkerOptions,
  ): Worker;
  worker(queue: string, handler: Handler | BatchHandler, options: WorkerOptions | BatchWorkerOptions = {}): Worker {
    this.checkOpen();
    const stopped = (): void => void this.workers.delete(worker);
    // The payload's type is the caller's promise (the overloads): the worker hands whatever was decoded.
    if (workerModules === null) throw new Error('this client was opened without workers: open it with connect()');
    this.schedulers ??= new workerModules.shared.SharedSchedulers(this.#store);
    const worker = new workerModules.worker.Worker(this.#store, queue, handler, options, stopped, this.schedulers);
    this.workers.add(worker);
    if (this.instruments !== null) attachMetrics(worker, this.instruments);
    if (worker.autoStart) worker.startInBackground();
    return worker;
  }

  /**
   * A Prometheus registry (prom-client, loaded on this first call) of this client's workers (messages handled
   * by outcome, handler, claim and finish durations, renewals, locks lost, store errors, in flight) and of the
   * queues' state, read from the store at each scrape. Serve it with `await registry.metrics()` and
   * `registry.contentType`. Each call returns a new registry; the worker metrics are the client's own, shared by
   * its registries and never in prom-client's global one. See docs/metrics.md.
   */
  async metrics(options: MetricsOptions = {}): Promise<MetricsRegistry> {
    this.checkOpen();
    checkKnownKeys('metrics', checkPlainObject('options', options), ['queues']);
    const selection = options.queues === undefined ? null : checkQueueList(options.queues);
    const { createMetricsRegistry, createWorkerMetrics } = await import('./metrics/registry.js');
    this.workerMetrics ??= createWorkerMetrics(() => this.workers).then((metrics) => {
      this.instruments = metrics;
      for (const worker of this.workers) attachMetrics(worker, metrics);
      return metrics;
    });
    return createMetricsRegistry(this.#store, await this.workerMetrics, selection);
  }

  /** Every queue that has a configuration or messages, sorted by name. */
  async queues(): Promise<string[]> {
    this.checkOpen();
    return this.#store.queues();
  }

  /**
   * One page of the queue's events (see QueueConfig `events`), oldest first: after `after` (default: from the
   * oldest kept), at most `limit` (default 1000). `missed` says events after `after` were trimmed unread.
   */
  async readEvents(queue: string, options: { after?: string; limit?: number } = {}): Promise<EventPage> {
    this.checkOpen();
    checkQueueName(queue);
    checkKnownKeys('readEvents', checkPlainObject('options', options), ['after', 'limit']);
    const after = options.after === undefined ? null : checkCursorText('after', options.after);
    const limit = options.limit === undefined ? 1000 : checkCount('limit', options.limit, 1, 10_000);
    const page = await this.#store.readEvents(queue, after, limit);
    return { ...page, events: page.events.map(publicEvent) };
  }

  /**
   * The queue's events, live, as an async iterable: from `after` ('now' by default: events written after this
   * call; 'start': the oldest kept; or a cursor from an event, a page or eventsHead). It waits on the store's
   * notification between pages. A reader that fell behind the retention gets an EventsMissedError carrying the
   * oldest kept events and the cursor to read on from. Breaking out of the loop, aborting `signal` or closing
   * the client ends it.
   */
  events(queue: string, options: EventsOptions = {}): AsyncIterable<StoredEvent> {
    this.checkOpen();
    checkQueueName(queue);
    const { after, signal } = checkEventsOptions(options);
    const stop = new AbortController();
    this.followers.add(stop);
    const start =
      after === 'start'
        ? Promise.resolve(null)
        : after === 'now'
          ? this.#store.eventsHead(queue)
          : Promise.resolve(after);
    // The head is read now, so 'now' means this call; a failure is reported when the loop starts.
    start.catch(() => undefined);
    const both = signal === undefined ? stop.signal : AbortSignal.any([stop.signal, signal]);
    return this.follow(queue, start, both, () => this.followers.delete(stop));
  }

  /** events(), its reading module loaded once the loop starts. */
  private async *follow(
    queue: string,
    start: Promise<string | null>,
    signal: AbortSignal,
    done: () => void,
  ): AsyncGenerator<StoredEvent> {
    const { followEvents } = await import('./events/follow.js');
    yield* followEvents(this.#store, queue, start, signal, done);
  }

  /**
   * Resolves with how the message ended (completed or failed for good) once it has; works with events off by
   * watching the message, and wakes on its events when they are on. Rejects with a TimeoutError (code
   * `TIMEOUT`) after `timeoutMs` (default 30 s), a MessageGoneError (code `MESSAGE_GONE`) when the message is
   * not in the queue (never enqueued, removed, GC'd), and a ClosedError when the client closes meanwhile.
   */
  async waitFor<R = unknown>(queue: string, id: string, options: WaitForOptions = {}): Promise<WaitResult<R>> {
    this.checkOpen();
    checkQueueName(queue);
    checkMessageId(id);
    const { timeoutMs, signal } = checkWaitForOptions(options);
    const stop = new AbortController();
    this.followers.add(stop);
    try {
      const { waitForOutcome } = await import('./events/wait-for.js');
      return (await waitForOutcome(
        this.#store,
        queue,
        id,
        timeoutMs,
        signal === undefined ? stop.signal : AbortSignal.any([stop.signal, signal]),
      )) as WaitResult<R>;
    } finally {
      this.followers.delete(stop);
    }
  }

  /** The message's state (with its handler's `result` once it succeeded with one), or null once it is gone. */
  async status<R = unknown>(queue: string, id: string): Promise<MessageStatus<R> | null> {
    this.checkOpen();
    return (await this.#store.status(checkQueueName(queue), checkMessageId(id))) as MessageStatus<R> | null;
  }

  /** Counts per state, live consumers and what each holds, dry runs, whether paused. O(states), not O(messages). */
  async queueStatus(queue: string): Promise<QueueStatus> {
    this.checkOpen();
    return this.#store.queueStatus(checkQueueName(queue));
  }

  /** A page of the queue's messages in the given states; pass `cursor` back for the next page. */
  async list(queue: string, options: ListOptions = {}): Promise<ListPage> {
    this.checkOpen();
    checkQueueName(queue);
    // A store without flows has no `waiting-children`: it is never asked for that state.
    const available = this.#store.capabilities.flows ? undefined : WITHOUT_FLOWS;
    const query = checkListOptions(options, available);
    if (query.states.length === 0) return { messages: [], cursor: null };
    const page = await this.#store.list(queue, query);
    const messages = page.messages.map(({ status, content, progress }): ListedMessage => {
      const listed = content === null ? status : { ...status, ...decodeContent(content) };
      return progress == null ? listed : { ...listed, progress: JSON.parse(progress) as unknown };
    });
    return { messages, cursor: page.cursor };
  }

  /** Everything kept about a message: status, payload, metadata, filters, policy and history; null once gone. */
  async show<P = Payload, R = unknown>(queue: string, id: string): Promise<MessageDetails<P, R> | null> {
    this.checkOpen();
    const details = await this.#store.inspect(checkQueueName(queue), checkMessageId(id));
    if (details === null) return null;
    const report = details.report ?? NO_REPORT;
    // The types are the caller's promise (see queue()); the values are what was stored.
    return <MessageDetails<P, R>>{
      ...details.status,
      ...decodeContent(details.content),
      policy: decodePolicy(details.policy) ?? {},
      priority: details.priority,
      group: details.group,
      history: details.history,
      progress: report.progress === null ? null : (JSON.parse(report.progress) as unknown),
      log: report.log.lines,
      logDropped: report.log.dropped,
    };
  }

  /** Queues a failed message again at attempt 1 (its history kept); refused with its state unless failed. */
  async retry(queue: string, id: string): Promise<ActionResult> {
    this.checkOpen();
    return one(await this.#store.retry(checkQueueName(queue), [checkMessageId(id)]));
  }

  /** Queues every failed message of the queue again (a redrive); resolves with how many. */
  async retryFailed(queue: string): Promise<{ retried: number }> {
    this.checkOpen();
    checkQueueName(queue);
    // Bounded by what failed before the call, so failures arriving meanwhile cannot keep it going forever.
    const before = (await this.#store.queueStatus(queue)).counts.failed;
    let retried = 0;
    while (retried < before) {
      const moved = await this.#store.retryFailed(queue, Math.min(REDRIVE_BATCH, before - retried));
      if (moved === 0) break;
      retried += moved;
    }
    return { retried };
  }

  /** Removes a message that is not running; refused with its state while locked. */
  async remove(queue: string, id: string): Promise<ActionResult> {
    this.checkOpen();
    return one(await this.#store.remove(checkQueueName(queue), [checkMessageId(id)]));
  }

  /**
   * Cancels a waiting, delayed or running message: it fails at once with the error `canceled` (and `reason`), or
   * moves to the dead-letter queue as a final failure would; a running handler's `job.signal` is aborted with a
   * CanceledError, and what it then returns is not stored. Refused with its state once finished; a
   * MessageGoneError when there is no such message.
   */
  async cancel(queue: string, id: string, reason?: string): Promise<ActionResult> {
    this.checkOpen();
    const error = cancelError(reason);
    checkQueueName(queue);
    checkMessageId(id);
    const result = await this.#store.cancel(queue, id, error);
    if (!result.ok && result.state === null) throw new MessageGoneError(queue, id);
    return result;
  }

  /**
   * Changes a waiting (queued or delayed) message: its payload, priority, ready time (`runAt` or `delayMs`) or
   * filters, checked as at enqueue, all in one atomic write; its id, attempts, history and enqueue time stay. A
   * claim at the same moment either takes the old content (the update is then refused) or the new. Refused with
   * its state once held or finished; a MessageGoneError when there is no such message.
   */
  async update(queue: string, id: string, changes: UpdateOptions): Promise<ActionResult> {
    checkKnownKeys('update', checkPlainObject('changes', changes), UPDATE_KEYS);
    this.checkOpen();
    const store = this.#store;
    checkQueueName(queue);
    checkMessageId(id);
    const config = changes.filters === undefined ? null : await this.cachedConfig(queue);
    const edit = this.prepareEdit(queue, changes, config);
    if (emptyEdit(edit)) throw new TypeError(`update needs at least one of ${UPDATE_KEYS.join(', ')}`);
    const result = await store.update(queue, id, edit);
    if (!result.ok && result.state === null) throw new MessageGoneError(queue, id);
    return result;
  }

  /** Ends a message's backoff now (queued-with-backoff or done-with-requeue → queued). */
  async promote(queue: string, id: string): Promise<ActionResult> {
    this.checkOpen();
    return one(await this.#store.promote(checkQueueName(queue), [checkMessageId(id)]));
  }

  /** Workers stop claiming from the queue within one wake-up; enqueues are still accepted. */
  async pause(queue: string): Promise<PauseResult> {
    return this.setPaused(queue, true);
  }

  async resume(queue: string): Promise<PauseResult> {
    return this.setPaused(queue, false);
  }

  /** Removes every message of the queues. Their configuration stays. */
  async clear(...queues: string[]): Promise<void> {
    this.checkOpen();
    await this.#store.clear(queues.map(checkQueueName));
  }

  async config(queue: string): Promise<QueueConfig> {
    this.checkOpen();
    return this.#store.config(checkQueueName(queue));
  }

  /** Changes the queue's stored configuration; filter enums merge per name (an empty list removes one). */
  async configure(queue: string, patch: Partial<QueueConfig>): Promise<QueueConfig> {
    this.checkOpen();
    checkQueueName(queue);
    const checked = checkConfigPatch(patch, queue);
    if (typeof checked.deadLetterQueue === 'string' && !this.#store.capabilities.deadLetterQueue) {
      throw new TypeError(
        `deadLetterQueue is not available on this ${this.#store.kind} store: it cannot move a message ` +
          'between two queues atomically (a Redis Cluster keeps them in different hash slots)',
      );
    }
    if (checked.groupRateLimit != null && !this.#store.capabilities.groupRateLimit) {
      throw new TypeError(
        `groupRateLimit is not available on this ${this.#store.kind} store yet; use SQLite, PostgreSQL, Redis or ZooKeeper`,
      );
    }
    return (await this.storeConfig(queue, checked)).config;
  }

  private async setPaused(queue: string, paused: boolean): Promise<PauseResult> {
    this.checkOpen();
    checkQueueName(queue);
    const { config, created } = await this.storeConfig(queue, { paused });
    return { paused: config.paused, created };
  }

  /** Writes a checked patch and keeps what the store answered as this client's cached configuration. */
  private async storeConfig(queue: string, patch: Partial<QueueConfig>): Promise<Configured> {
    const configured = await this.#store.configure(queue, patch);
    this.configCache.set(queue, { config: configured.config, readAt: Date.now() });
    return configured;
  }

  /**
   * Creates or replaces the queue's schedule `name`: from the first slot after now, each slot of `timing`
   * (`{ cron, tz? }` or `{ everyMs }`) enqueues `payload` with `options`, once across every process, as a
   * message whose id is `<name>@<slot in ISO 8601>`. Workers of the queue fire schedules (worker option
   * `schedules`); slots missed while none ran are caught up with at most `catchUp` messages (default 1).
   * Bad input is a TypeError and nothing is written.
   */
  async schedule(
    queue: string,
    name: string,
    timing: ScheduleTiming,
    payload: Payload,
    options: ScheduleOptions = {},
  ): Promise<{ created: boolean; schedule: ScheduleInfo }> {
    this.checkOpen();
    checkQueueName(queue);
    const { defineSchedule, describeSchedule } = await import('./schedule/define.js');
    const stored = await defineSchedule(
      {
        queue,
        name,
        timing,
        payload,
        options,
        config: () => this.cachedConfig(queue),
        maxPayloadBytes: this.#store.capabilities.maxPayloadBytes,
      },
      Date.now,
    );
    const created = await this.#store.putSchedule(queue, stored);
    this.schedulers?.wake(queue);
    return { created, schedule: describeSchedule(stored) };
  }

  /** The queue's schedules, sorted by name. */
  async schedules(queue: string): Promise<ScheduleInfo[]> {
    this.checkOpen();
    const { describeSchedule } = await import('./schedule/define.js');
    return (await this.#store.schedules(checkQueueName(queue))).map(describeSchedule);
  }

  /** Removes the queue's schedule `name`; false when there was none. Messages it already enqueued stay. */
  async unschedule(queue: string, name: string): Promise<boolean> {
    this.checkOpen();
    return this.#store.removeSchedule(checkQueueName(queue), checkScheduleName(name));
  }

  /** Runs GC on the queue now (unless another GC holds it). */
  async gc(queue: string): Promise<GcResult> {
    this.checkOpen();
    return this.#store.gc(checkQueueName(queue), true);
  }

  /** Stops this client's workers gracefully, waits for background upkeep, closes the store. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const follower of this.followers) follower.abort(new ClosedError('client'));
    await Promise.all([...this.workers].map((worker) => worker.stop()));
    await Promise.allSettled([...this.background]);
    await this.#store.close();
  }

  /** The message of checked options (their keys already checked against ENQUEUE_KEYS or BATCH_KEYS). */
  private prepare(queue: string, payload: Payload, item: EnqueueOptions, config: QueueConfig | null): NewMessage {
    const encoded = encodePayload(payload, this.#store.capabilities.maxPayloadBytes);
    const filters =
      item.filters === undefined || config === null ? {} : checkMessageFilters(queue, item.filters, config);
    const debounce = item.debounce === undefined ? null : checkDebounce(item.debounce);
    const delayMs = initialBackoff(item, debounce);
    const policy = encodePolicy(withExpiry(checkPolicy(item), item.expireAfterMs, delayMs));
    return {
      id: item.id === undefined ? newMessageId() : checkMessageId(item.id),
      payload: encoded.bytes,
      encoding: encoded.encoding,
      metadata: item.metadata === undefined ? {} : checkPlainObject('metadata', item.metadata),
      filters,
      filterClass: item.filters === undefined ? '' : filterClass(filters),
      initialBackoffMs: delayMs,
      allowRequeue: item.allowRequeue === undefined ? false : checkBoolean('allowRequeue', item.allowRequeue),
      replacePayload: item.replacePayload === undefined ? false : checkBoolean('replacePayload', item.replacePayload),
      policy,
      priority: item.priority === undefined ? DEFAULT_PRIORITY : checkPriority(item.priority),
      lifo: item.lifo === undefined ? false : checkLifo(item),
      group: item.group === undefined ? null : checkGroup(item.group),
      debounceId: debounce === null ? null : debounce.id,
    };
  }

  /** An update's checked changes (keys already checked against UPDATE_KEYS); filters need the queue's config. */
  private prepareEdit(queue: string, changes: UpdateOptions, config: QueueConfig | null): MessageEdit {
    const payload =
      changes.payload === undefined ? null : encodePayload(changes.payload, this.#store.capabilities.maxPayloadBytes);
    if (changes.runAt !== undefined && changes.delayMs !== undefined)
      throw new TypeError('give at most one of runAt and delayMs, not runAt and delayMs');
    const delayMs =
      changes.runAt !== undefined
        ? Math.max(0, checkRunAt(changes.runAt) - Date.now())
        : changes.delayMs === undefined
          ? null
          : checkMs('delayMs', changes.delayMs);
    const filters =
      changes.filters === undefined || config === null ? null : checkMessageFilters(queue, changes.filters, config);
    return {
      payload,
      priority: changes.priority === undefined ? null : checkPriority(changes.priority),
      delayMs,
      filters: filters === null ? null : { values: filters, filterClass: filterClass(filters) },
    };
  }

  private async cachedConfig(queue: string): Promise<QueueConfig> {
    const cached = this.configCache.get(queue);
    if (cached !== undefined && Date.now() - cached.readAt < CONFIG_CACHE_MS) return cached.config;
    const config = await this.#store.config(queue);
    this.configCache.set(queue, { config, readAt: Date.now() });
    return config;
  }

  /** Producer-side GC, as the zkmq design asks: at most once per stored interval, never in the caller's way. */
  private maybeGcInBackground(queue: string): void {
    if (!this.maintenance) return;
    const now = Date.now();
    const interval = this.configCache.get(queue)?.config.gcIntervalMs ?? DEFAULT_QUEUE_CONFIG.gcIntervalMs;
    if (now - (this.lastGc.get(queue) ?? 0) < interval) return;
    this.lastGc.set(queue, now);
    const run = this.#store
      .gc(queue, false)
      .catch(this.onError)
      .finally(() => this.background.delete(run));
    this.background.add(run);
  }

  private checkOpen(): void {
    if (this.closed) throw new ClosedError('client');
  }
}

/** The delay before a new message is ready: `initialBackoffMs`, `runAt` or `debounce.ms`, at most one of them. */
function initialBackoff(item: EnqueueOptions, debounce: Debounce | null): number {
  // Most messages give none of the three: no list of names to build.
  if (item.initialBackoffMs === undefined && item.runAt === undefined && debounce === null) return 0;
  const given = [
    item.initialBackoffMs === undefined ? null : 'initialBackoffMs',
    item.runAt === undefined ? null : 'runAt',
    debounce === null ? null : 'debounce',
  ].filter((name) => name !== null);
  if (given.length > 1)
    throw new TypeError(`give at most one of initialBackoffMs, runAt and debounce, not ${given.join(' and ')}`);
  if (item.runAt !== undefined) return Math.max(0, checkRunAt(item.runAt) - Date.now());
  if (debounce !== null) return debounce.ms;
  return item.initialBackoffMs === undefined ? 0 : checkMs('initialBackoffMs', item.initialBackoffMs);
}

/** `lifo` as given; true only for a message ready at once, since its place is taken as it is enqueued. */
function checkLifo(item: EnqueueOptions): boolean {
  const lifo = checkBoolean('lifo', item.lifo);
  if (!lifo) return false;
  const delayed = [
    item.initialBackoffMs === undefined || item.initialBackoffMs === 0 ? null : 'initialBackoffMs',
    item.runAt === undefined ? null : 'runAt',
    item.debounce === undefined ? null : 'debounce',
  ].find((name) => name !== null);
  if (delayed !== undefined) throw new TypeError(`lifo is for a message ready at once, not with ${delayed}`);
  return true;
}

function decodeContent(content: StoredContent): { payload: Payload; metadata: Metadata; filters: FilterValues } {
  return {
    payload: decodePayload(content.payload, content.encoding),
    metadata: content.metadata,
    filters: content.filters,
  };
}

function attachMetrics(worker: Worker, metrics: WorkerMetrics): void {
  metrics.startQueue(worker.queue);
  worker.instruments = metrics;
}

function checkQueueList(value: unknown): string[] {
  if (!Array.isArray(value)) throw new TypeError('metrics queues must be an array of queue names');
  return [...new Set(value.map(checkQueueName))];
}

function one(results: readonly ActionResult[]): ActionResult {
  const [result] = results;
  if (result === undefined) throw new Error('store returned no result for an action');
  return result;
}
