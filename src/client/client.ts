/**
 * The public API: a client bound to one store. It validates and encodes at the
 * boundary, then speaks only the store contract.
 */
import { bindStore } from './client-store.js';
import { ClosedError, MessageGoneError } from '../model/errors.js';
import { checkCursorText, checkEventsOptions, checkWaitForOptions } from '../events/options.js';
import type { EventsOptions, WaitForOptions } from '../events/options.js';
import type { WaitResult } from '../events/wait-for.js';
import { cancelError } from '../model/cancel.js';
import { emptyEdit, type UpdateOptions } from '../model/update.js';
import { checkConfigPatch } from '../model/config.js';
import type { FlowIds, FlowNode, FlowTree } from '../model/flow.js';
import { checkScheduleName } from '../model/scheduling.js';
import {
  checkBoolean,
  checkCount,
  checkKnownKeys,
  checkMessageId,
  checkPlainObject,
  checkQueueName,
} from '../model/validate.js';
import type { ScheduleInfo, ScheduleOptions } from '../schedule/define.js';
import type { ScheduleTiming } from '../schedule/timing.js';
import { openStore, resolveStoreUrl } from '../stores/url.js';
import type { TickBatcher } from './tick-batcher.js';
import type { BatchWorkerOptions, Worker, WorkerOptions } from '../worker/worker.js';
import { makeQueue, type Queue } from './queue.js';
import { publicEvent, type StoredEvent } from '../model/events.js';
import type { EventPage, NewMessage, Store } from '../stores/contract/contract.js';
import type { MetricsOptions, MetricsRegistry } from '../metrics/registry.js';
import { checkPatchFits, one, redriveFailed } from './actions.js';
import { QueueConfigs } from './configs.js';
import { ClientWorkers } from './workers.js';
import { readFlow, writeFlow } from './flows.js';
import { Followers, followQueue } from './follow.js';
import { listMessages, showMessage } from './inspect.js';
import { loadedSendTracing, loadSendTracing, loadWorkerModules } from './modules.js';
import { BATCH_KEYS, ENQUEUE_KEYS, UPDATE_KEYS, prepareEdit, prepareMessage } from './prepare.js';
import { ProducerGc, senderOf, tickEnqueues, type Send } from './producer.js';
import { listSchedules, putSchedule } from './schedules.js';
import type {
  ActionResult,
  BatchItem,
  EnqueueBatchOptions,
  EnqueueOptions,
  EnqueueResult,
  GcResult,
  BatchHandler,
  Handler,
  ListOptions,
  ListPage,
  MessageDetails,
  MessageStatus,
  Payload,
  QueueConfig,
  QueueStatus,
  SqlTransaction,
} from '../model/types.js';

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

// The only way to build a Client; the constructor is private so its internal parameters stay out of the API.
let construct: (url: string, store: Store, options: ConnectOptions) => Client;

export class Client {
  readonly url: string;
  readonly #store: Store;
  /** Producer GC after enqueues; null with `maintenance: false`. */
  private readonly producerGc: ProducerGc | null;
  private readonly configs: QueueConfigs;
  private readonly workers: ClientWorkers;
  // Live event readers and waits, ended when the client closes.
  private readonly followers = new Followers();
  private readonly enqueues: TickBatcher<NewMessage, EnqueueResult>;
  private closed = false;

  static {
    construct = (url, store, options) => new Client(url, store, options);
  }

  /** Use `connect()`. */
  private constructor(url: string, store: Store, options: ConnectOptions) {
    this.url = url;
    this.#store = store;
    bindStore(this, store);
    const maintenance = options.maintenance === undefined ? true : checkBoolean('maintenance', options.maintenance);
    const onError = options.onError ?? ((error) => console.error('kvmq:', error));
    this.producerGc = maintenance ? new ProducerGc(store, onError) : null;
    this.configs = new QueueConfigs(store);
    this.enqueues = tickEnqueues(store);
    this.workers = new ClientWorkers(store);
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
    const [result] = await (loadedSendTracing() ?? (await loadSendTracing())).traceSend(queue, [message], false, send);
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
    const results = await (loadedSendTracing() ?? (await loadSendTracing())).traceSend(queue, messages, true, send);
    this.maybeGcInBackground(queue);
    return results;
  }

  /**
   * Writes a flow: the tree's messages, every one or none (FlowRefusedError when an id exists), each parent
   * `waiting-children` until its children have ended. Children may be in other queues. Resolves with the ids.
   */
  async flow(tree: FlowTree): Promise<FlowIds> {
    this.checkOpen();
    return writeFlow(this.#store, tree, {
      config: (queue) => this.cachedConfig(queue),
      prepare: (queue, payload, options, config) => this.prepare(queue, payload, options, config),
    });
  }

  /** The tree of the flow the message belongs to, from its root, each node with its status; null once it is gone. */
  async getFlow(queue: string, id: string): Promise<FlowNode | null> {
    this.checkOpen();
    return readFlow(this.#store, checkQueueName(queue), checkMessageId(id));
  }

  /** Where an enqueue's messages go (see senderOf). */
  private sender(queue: string, tx: SqlTransaction | undefined): Send {
    return senderOf(this.#store, this.enqueues, queue, tx);
  }

  /**
   * The queue `name` with its payload's type `P` and its handlers' result type `R`: enqueue, worker, waitFor,
   * status and show typed end to end. The types are not checked at run time.
   */
  queue<P = Payload, R = unknown>(name: string): Queue<P, R> {
    return makeQueue<P, R>(this, checkQueueName(name));
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
    // The payload's type is the caller's promise (the overloads): the worker hands whatever was decoded.
    return this.workers.make(queue, handler, options);
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
    return this.workers.registry(options.queues);
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
    return followQueue(this.#store, queue, after, this.followers.start(signal));
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
    const follower = this.followers.start(signal);
    try {
      const { waitForOutcome } = await import('../events/wait-for.js');
      return (await waitForOutcome(this.#store, queue, id, timeoutMs, follower.signal)) as WaitResult<R>;
    } finally {
      follower.done();
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
    return listMessages(this.#store, queue, options);
  }

  /** Everything kept about a message: status, payload, metadata, filters, policy and history; null once gone. */
  async show<P = Payload, R = unknown>(queue: string, id: string): Promise<MessageDetails<P, R> | null> {
    this.checkOpen();
    return showMessage<P, R>(this.#store, checkQueueName(queue), checkMessageId(id));
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
    return redriveFailed(this.#store, queue);
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
    const edit = prepareEdit(queue, changes, config, store.capabilities.maxPayloadBytes);
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
    checkPatchFits(this.#store, checked);
    return (await this.configs.write(queue, checked)).config;
  }

  private async setPaused(queue: string, paused: boolean): Promise<PauseResult> {
    this.checkOpen();
    checkQueueName(queue);
    const { config, created } = await this.configs.write(queue, { paused });
    return { paused: config.paused, created };
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
    const put = await putSchedule(this.#store, {
      queue,
      name,
      timing,
      payload,
      options,
      config: () => this.cachedConfig(queue),
    });
    this.workers.wake(queue);
    return put;
  }

  /** The queue's schedules, sorted by name. */
  async schedules(queue: string): Promise<ScheduleInfo[]> {
    this.checkOpen();
    return listSchedules(this.#store, checkQueueName(queue));
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
    this.followers.endAll(new ClosedError('client'));
    await this.workers.stopAll();
    await this.producerGc?.settled();
    await this.#store.close();
  }

  /** The message of checked options (their keys already checked against ENQUEUE_KEYS or BATCH_KEYS). */
  private prepare(queue: string, payload: Payload, item: EnqueueOptions, config: QueueConfig | null): NewMessage {
    return prepareMessage(queue, payload, item, config, this.#store.capabilities.maxPayloadBytes);
  }

  private cachedConfig(queue: string): Promise<QueueConfig> {
    return this.configs.cached(queue);
  }

  private maybeGcInBackground(queue: string): void {
    this.producerGc?.maybeRun(queue, this.configs.known(queue));
  }

  private checkOpen(): void {
    if (this.closed) throw new ClosedError('client');
  }
}
