/**
 * The etcd store: kvmq on etcd v3 with the etcds key protocol (docs/etcd.md).
 * Producers write straight into the ordered queue; a dispatcher elected per
 * queue among the processes that consume it hands messages to consumers,
 * which claim from their inbox and finish with guarded Txns. The etcd3
 * client library is loaded only when an etcd URL is opened.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { importDriver } from '../contract/driver.js';
import { ClosedError, StoreUnavailableError } from '../../model/errors.js';
import { ANSWER_WAIT_MS, claimFromInbox } from './claim.js';
import { clearQueue } from './clear.js';
import { QueueWatches } from './queue-watches.js';
import { LocalConsumer } from './consumer.js';
import { DispatcherHost } from './dispatcher/host.js';
import { enqueueMessages, submitEnqueues, type Answer } from './enqueue.js';
import { extendDeliveries, finishDeliveries, releaseDeliveries } from './finish.js';
import { writeReports } from './reports.js';
import { decodeReport } from '../contract/report-codec.js';
import { getMany } from './txn-batch.js';
import { withProgress } from '../contract/listing-progress.js';
import { runGc } from './gc.js';
import { liveConsumers, messageStatus, stateCounts } from './inspect.js';
import { MAX_PAYLOAD_BYTES, QueueKeys } from './keys.js';
import { decodeEoq, readConfig, writeConfig } from './queue-state.js';
import { parseEtcdUrl } from './url.js';
import type { DeliveryListener, DispatcherLog } from './dispatcher/types.js';
import type { Kv } from './kv.js';
import { inspectMessage, listMessages } from './listing.js';
import {
  cancelMessage,
  promoteMessages,
  removeMessages,
  retryMessages,
  retryOldestFailed,
  updateMessage,
} from './actions.js';
import { EventSubscriptions, eventsHead, readEvents } from './queue-events.js';
import { listQueues, registerOp } from './queue-registry.js';
import { takeTurn } from './turns.js';
import { fireSchedule, listSchedules, putSchedule, removeSchedule } from './schedules.js';
import type { ListQuery } from '../../model/list.js';
import { writeFlow } from './flow-write.js';
import { flowChildren, flowTree } from './flow-read.js';
import type { FlowNode } from '../../model/flow.js';
import type {
  CanceledMessage,
  ClaimRequest,
  ClaimResult,
  Configured,
  ConsumerRegistration,
  EventPage,
  Finish,
  FinishResult,
  FlowMessage,
  HeldAttempt,
  NewMessage,
  Report,
  Store,
  StoreCapabilities,
  StoredDetails,
  StoredPage,
  StoredSchedule,
} from '../contract/contract.js';
import { QueueListeners } from '../contract/queue-listeners.js';
import type { MessageEdit } from '../../model/update.js';
import type {
  ActionResult,
  ConsumerInfo,
  EnqueueResult,
  GcResult,
  MessageStatus,
  QueueConfig,
  QueueStatus,
} from '../../model/types.js';

export async function openEtcdStore(url: string, log?: DispatcherLog): Promise<EtcdStore> {
  const options = parseEtcdUrl(url);
  const lib = await importDriver('etcd', () => import('etcd3'));
  const { Etcd3Kv } = await import('./etcd3-kv.js');
  const kv = new Etcd3Kv(lib, options);
  // Fail now, with a clear error, if etcd is unreachable or refuses the credentials.
  try {
    await kv.range({ key: `${options.prefix}/queue/`, limit: 1, keysOnly: true });
  } catch (error) {
    await kv.close().catch(() => undefined);
    throw error instanceof StoreUnavailableError
      ? new StoreUnavailableError(`${error.message}; is etcd running at ${options.hosts.join(',')}?`, error.cause)
      : error;
  }
  return new EtcdStore(kv, options.prefix, log ?? defaultLog, () => kv.close(), options.dispatcherStallMs);
}

const defaultLog: DispatcherLog = (level, message) => {
  if (level !== 'info') console.error(`kvmq etcd ${level}: ${message}`);
};

export class EtcdStore implements Store {
  readonly kind = 'etcd';
  readonly capabilities: StoreCapabilities = {
    maxPayloadBytes: MAX_PAYLOAD_BYTES,
    wakeups: true,
    instantRelease: true,
    deadLetterQueue: true,
    claimWithFinishes: false,
    overlapClaims: false,
    flows: true,
    // Finishes (and enqueueEach) go through a lane per queue (txn-lane.ts).
    groupCommit: true,
  };
  /** This process's id in the etcds protocol (the value of the election keys it holds). */
  readonly nodeId = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  readonly host: DispatcherHost;
  private readonly locals = new Map<string, { consumer: LocalConsumer; release: () => void }>();
  /** The same consumers by registration key, for deliveries this process's dispatcher makes. */
  private readonly byKey = new Map<string, LocalConsumer>();
  private readonly listeners = new QueueListeners();
  private readonly cancelListeners = new QueueListeners<CanceledMessage | null>();
  private readonly queueWatches: QueueWatches;
  private readonly keyCache = new Map<string, QueueKeys>();
  private readonly configReads = new Map<string, Promise<void>>();
  /** Queues this process has put in the queue registry (at its first enqueue to each). */
  private readonly registered = new Map<string, Promise<void>>();
  private readonly eventSubscriptions: EventSubscriptions;
  private readonly stopLeaseWatch: () => void;
  private closed = false;

  constructor(
    readonly kv: Kv,
    readonly root: string,
    private readonly log: DispatcherLog,
    private readonly closeKv: () => Promise<void>,
    dispatcherStallMs?: number,
  ) {
    const told: DeliveryListener = (consumerKey, delivery) => {
      this.byKey.get(consumerKey)?.told(delivery);
    };
    this.host = new DispatcherHost(kv, root, this.nodeId, log, told, dispatcherStallMs);
    this.eventSubscriptions = new EventSubscriptions(kv, (queue) => this.keys(queue));
    this.queueWatches = new QueueWatches(kv, (queue) => this.keys(queue));
    this.stopLeaseWatch = kv.session.onLost(() => {
      for (const { consumer } of this.locals.values()) consumer.leaseLost();
    });
  }

  keys(queue: string): QueueKeys {
    let keys = this.keyCache.get(queue);
    if (keys === undefined) {
      keys = new QueueKeys(this.root, queue);
      this.keyCache.set(queue, keys);
    }
    return keys;
  }

  async enqueue(queue: string, messages: readonly NewMessage[]): Promise<EnqueueResult[]> {
    this.checkOpen();
    if (messages.length === 0) return [];
    // The configuration as the queue's watch holds it: events on or off, with no read per enqueue.
    const [state] = await Promise.all([this.queueWatches.get(queue), this.register(queue)]);
    return enqueueMessages(this.kv, this.keys(queue), messages, state.config?.events === true);
  }

  enqueueEach(queue: string, messages: readonly NewMessage[]): Promise<EnqueueResult>[] {
    const answers: Answer[] = [];
    const results = messages.map(
      (_, i) => new Promise<EnqueueResult>((resolve, reject) => (answers[i] = { resolve, reject })),
    );
    const fail = (error: unknown): void => answers.forEach((a) => a.reject(error));
    try {
      this.checkOpen();
    } catch (error) {
      fail(error);
      return results;
    }
    Promise.all([this.queueWatches.get(queue), this.register(queue)]).then(([state]) => {
      submitEnqueues(this.kv, this.keys(queue), messages, state.config?.events === true, answers);
    }, fail);
    return results;
  }

  async claim(queue: string, request: ClaimRequest): Promise<ClaimResult> {
    this.checkOpen();
    const consumer = this.consumer(queue, request.consumerId, { lockMs: request.lockMs });
    return claimFromInbox(this.kv, this.keys(queue), consumer, await this.queueWatches.get(queue), request);
  }

  async extend(queue: string, consumerId: string, held: readonly HeldAttempt[], lockMs: number): Promise<string[]> {
    this.checkOpen();
    const entry = this.locals.get(consumerKey(queue, consumerId));
    if (entry === undefined) return held.map((h) => h.id);
    return extendDeliveries(this.kv, this.keys(queue), entry.consumer, held, lockMs);
  }

  async finish(queue: string, consumerId: string, finishes: readonly Finish[]): Promise<FinishResult[]> {
    this.checkOpen();
    const entry = this.locals.get(consumerKey(queue, consumerId));
    if (entry === undefined) return finishes.map(() => 'lost');
    const givenBack = finishes.filter((f) => f.startedAt === null).length;
    if (givenBack > 0) {
      // Handed back unrun: the room it frees is not for the dispatcher to fill at once (the next claim asks).
      const { capacity, lockMs, accepts } = entry.consumer.info;
      await entry.consumer.demand({ capacity: Math.max(0, capacity - givenBack), lockMs, accepts });
    }
    // The configuration as the queue's watch holds it: no read per finish.
    const config = (await this.queueWatches.get(queue)).config;
    const dlq = config?.deadLetterQueue ?? null;
    return finishDeliveries(
      this.kv,
      this.keys(queue),
      entry.consumer,
      finishes,
      dlq === null ? null : this.keys(dlq),
      config?.events === true,
    );
  }

  async report(queue: string, consumerId: string, reports: readonly Report[]): Promise<FinishResult[]> {
    this.checkOpen();
    const entry = this.locals.get(consumerKey(queue, consumerId));
    if (entry === undefined) return reports.map(() => 'lost');
    const config = (await this.queueWatches.get(queue)).config;
    return writeReports(this.kv, this.keys(queue), entry.consumer, reports, config?.events === true);
  }

  status(queue: string, id: string): Promise<MessageStatus | null> {
    this.checkOpen();
    return messageStatus(this.kv, this.keys(queue), id);
  }

  async queueStatus(queue: string): Promise<QueueStatus> {
    this.checkOpen();
    const keys = this.keys(queue);
    const [counts, consumers, eoq, config] = await Promise.all([
      stateCounts(this.kv, keys),
      liveConsumers(this.kv, keys),
      this.kv.range({ key: keys.eoq }),
      readConfig(this.kv, keys),
    ]);
    return {
      queue,
      counts,
      total: Object.values(counts).reduce((a, b) => a + b, 0),
      consumers,
      dryRuns: decodeEoq(eoq.kvs[0]?.value, 0).dryRuns,
      paused: config.paused,
    };
  }

  list(queue: string, query: ListQuery): Promise<StoredPage> {
    this.checkOpen();
    return listMessages(this.kv, this.keys(queue), query).then((page) => this.withProgress(queue, page));
  }

  /** The page with each message's progress, read for its ids (cost: the page). */
  private async withProgress(queue: string, page: StoredPage): Promise<StoredPage> {
    const keys = this.keys(queue);
    const ids = page.messages.map((m) => m.status.id);
    const kvs = await getMany(
      this.kv,
      ids.map((id) => keys.report(id)),
    );
    const progress = new Map<string, string>();
    ids.forEach((id, i) => {
      const value = decodeReport(kvs[i]?.value).progress;
      if (value !== null) progress.set(id, value);
    });
    return withProgress(page, progress);
  }

  inspect(queue: string, id: string): Promise<StoredDetails | null> {
    this.checkOpen();
    return inspectMessage(this.kv, this.keys(queue), id);
  }

  async retry(queue: string, ids: readonly string[]): Promise<ActionResult[]> {
    this.checkOpen();
    return retryMessages(this.kv, this.keys(queue), ids, await this.eventsOn(queue));
  }

  async retryFailed(queue: string, max: number): Promise<number> {
    this.checkOpen();
    return retryOldestFailed(this.kv, this.keys(queue), max, await this.eventsOn(queue));
  }

  async remove(queue: string, ids: readonly string[]): Promise<ActionResult[]> {
    this.checkOpen();
    return removeMessages(this.kv, this.keys(queue), ids, await this.eventsOn(queue));
  }

  promote(queue: string, ids: readonly string[]): Promise<ActionResult[]> {
    this.checkOpen();
    return promoteMessages(this.kv, this.keys(queue), ids);
  }

  async clear(queues: readonly string[]): Promise<void> {
    this.checkOpen();
    for (const queue of queues) await clearQueue(this.kv, this.keys(queue));
  }

  /** Reads of one queue's configuration answer in call order, as workers starting together expect. */
  config(queue: string): Promise<QueueConfig> {
    this.checkOpen();
    const previous = this.configReads.get(queue) ?? Promise.resolve();
    const read = previous.then(
      () => readConfig(this.kv, this.keys(queue)),
      () => readConfig(this.kv, this.keys(queue)),
    );
    const settled = read.then(
      () => undefined,
      () => undefined,
    );
    this.configReads.set(queue, settled);
    void settled.then(() => {
      if (this.configReads.get(queue) === settled) this.configReads.delete(queue);
    });
    return read;
  }

  async configure(queue: string, patch: Partial<QueueConfig>): Promise<Configured> {
    this.checkOpen();
    const { config, created, revision } = await writeConfig(this.kv, this.keys(queue), patch);
    // This process's claims see the change at once (a pause stops them), before the watch brings it.
    const watched = this.queueWatches.peek(queue);
    if (watched !== undefined) {
      const state = await watched.catch(() => null);
      if (state !== null && state.configRev < revision) {
        state.config = config;
        state.configRev = revision;
      }
    }
    return { config, created };
  }

  async gc(queue: string, force: boolean): Promise<GcResult> {
    this.checkOpen();
    const keys = this.keys(queue);
    return runGc(this.kv, keys, await readConfig(this.kv, keys), force);
  }

  async registerConsumer(queue: string, registration: ConsumerRegistration): Promise<void> {
    this.checkOpen();
    const info = { host: registration.host, pid: registration.pid, lockMs: registration.ttlMs };
    const consumer = this.consumer(queue, registration.id, info);
    await consumer.touch(info, registration.ttlMs);
  }

  /**
   * Stops taking deliveries (capacity 0, waiting for the dispatcher to say so),
   * gives back the ones never handed to a handler, then removes the registration.
   */
  async unregisterConsumer(queue: string, consumerId: string): Promise<void> {
    const key = consumerKey(queue, consumerId);
    const entry = this.locals.get(key);
    if (entry === undefined) return;
    const { consumer, release } = entry;
    const keys = this.keys(queue);
    try {
      if (!this.closed) {
        await consumer.demand({ capacity: 0, lockMs: consumer.info.lockMs, accepts: consumer.info.accepts });
        await consumer.waitForAnswer(ANSWER_WAIT_MS, () => false);
        await releaseDeliveries(this.kv, keys, consumer, consumer.unclaimed());
        await this.kv.txn({
          compare: [],
          success: [
            { type: 'delete', key: consumer.key },
            { type: 'delete', key: keys.answer(consumer.key) },
          ],
        });
      }
    } finally {
      this.locals.delete(key);
      if (this.byKey.get(consumer.key) === consumer) this.byKey.delete(consumer.key);
      release();
      await consumer.close();
    }
  }

  async consumers(queue: string): Promise<ConsumerInfo[]> {
    this.checkOpen();
    return liveConsumers(this.kv, this.keys(queue));
  }

  /** From the registry of queues (queue-registry.ts): one range, O(queues). */
  queues(): Promise<string[]> {
    this.checkOpen();
    return listQueues(this.kv, this.root);
  }

  readEvents(queue: string, after: string | null, limit: number): Promise<EventPage> {
    this.checkOpen();
    return readEvents(this.kv, this.keys(queue), after, limit);
  }

  eventsHead(queue: string): Promise<string> {
    this.checkOpen();
    return eventsHead(this.kv, this.keys(queue));
  }

  subscribeEvents(queue: string, listener: () => void): () => void {
    this.checkOpen();
    return this.eventSubscriptions.subscribe(queue, listener);
  }

  putSchedule(queue: string, schedule: StoredSchedule): Promise<boolean> {
    this.checkOpen();
    return putSchedule(this.kv, this.keys(queue), schedule);
  }

  schedules(queue: string): Promise<StoredSchedule[]> {
    this.checkOpen();
    return listSchedules(this.kv, this.keys(queue));
  }

  removeSchedule(queue: string, name: string): Promise<boolean> {
    this.checkOpen();
    return removeSchedule(this.kv, this.keys(queue), name);
  }

  async fireSchedule(
    queue: string,
    expected: StoredSchedule,
    nextAt: number,
    messages: readonly NewMessage[],
  ): Promise<EnqueueResult[] | null> {
    this.checkOpen();
    // As enqueue: the configuration as the queue's watch holds it, and the queue in the registry.
    const [state] = await Promise.all([this.queueWatches.get(queue), this.register(queue)]);
    return fireSchedule(this.kv, this.keys(queue), expected, nextAt, messages, state.config?.events === true);
  }

  takeTurn(queue: string, name: string, everyMs: number): Promise<boolean> {
    this.checkOpen();
    return takeTurn(this.kv, this.keys(queue), name, everyMs);
  }

  /**
   * A consumer's deliveries hang on its registration, a key of this process's session lease: once the lease ends,
   * the dispatcher hands them to others whatever their locks say.
   */
  claimsHeldUntil(): number {
    return this.kv.session.liveUntil?.() ?? Infinity;
  }

  subscribe(queue: string, listener: () => void): () => void {
    const remove = this.listeners.add(queue, listener);
    const release = this.host.hold(queue);
    return () => {
      remove();
      release();
    };
  }

  /** Runs a dispatcher candidate for the queue (for queues only plain clients use) until the release is called. */
  dispatch(queue: string): () => void {
    this.checkOpen();
    return this.host.hold(queue);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.stopLeaseWatch();
    this.eventSubscriptions.close();
    await this.host.close();
    for (const { consumer, release } of this.locals.values()) {
      release();
      await consumer.close();
    }
    this.locals.clear();
    this.byKey.clear();
    this.queueWatches.close();
    await this.closeKv();
  }

  private consumer(queue: string, id: string, info: { host?: string; pid?: number; lockMs: number }): LocalConsumer {
    const key = consumerKey(queue, id);
    let entry = this.locals.get(key);
    if (entry === undefined) {
      const consumer = new LocalConsumer(
        this.kv,
        this.keys(queue),
        id,
        { host: info.host ?? hostname(), pid: info.pid ?? process.pid, lockMs: info.lockMs },
        () => this.notify(queue),
        () => this.takenAway(queue),
      );
      entry = { consumer, release: this.host.hold(queue) };
      this.locals.set(key, entry);
      this.byKey.set(consumer.key, consumer);
    }
    return entry.consumer;
  }

  /** Whether the queue's configuration, as its watch holds it, has events on. */
  private async eventsOn(queue: string): Promise<boolean> {
    return (await this.queueWatches.get(queue)).config?.events === true;
  }

  /** Puts the queue in the registry once per process (the first enqueue to it). */
  private register(queue: string): Promise<void> {
    let done = this.registered.get(queue);
    if (done === undefined) {
      const written = this.kv.txn({ compare: [], success: [registerOp(this.keys(queue))] }).then(() => undefined);
      written.catch(() => this.registered.delete(queue));
      this.registered.set(queue, written);
      done = written;
    }
    return done;
  }

  /** A held delivery deleted by another writer: the queue's workers renew, and find which and why. */
  private takenAway(queue: string): void {
    this.cancelListeners.notify(queue, null);
  }

  /** Its holder's delivery goes in the cancel's Txn: the consumer's inbox watch sees it go (takenAway). */
  subscribeCancels(queue: string, listener: (canceled: CanceledMessage | null) => void): () => void {
    return this.cancelListeners.add(queue, listener);
  }

  async flow(messages: readonly FlowMessage[]): Promise<void> {
    this.checkOpen();
    await writeFlow(this.kv, this.root, messages, (queue) => this.eventsOn(queue));
  }

  async flowTree(queue: string, id: string): Promise<FlowNode | null> {
    this.checkOpen();
    return flowTree(this.kv, this.root, queue, id);
  }

  async flowChildren(queue: string, id: string): Promise<MessageStatus[]> {
    this.checkOpen();
    return flowChildren(this.kv, this.root, queue, id);
  }

  async cancel(queue: string, id: string, error: string): Promise<ActionResult> {
    this.checkOpen();
    const config = (await this.queueWatches.get(queue)).config;
    const dlq = config?.deadLetterQueue ?? null;
    const dlqKeys = dlq === null ? null : this.keys(dlq);
    return cancelMessage(this.kv, this.keys(queue), id, error, config?.events === true, dlqKeys);
  }

  async update(queue: string, id: string, edit: MessageEdit): Promise<ActionResult> {
    this.checkOpen();
    const config = (await this.queueWatches.get(queue)).config;
    return updateMessage(this.kv, this.keys(queue), id, edit, config?.events === true);
  }

  private notify(queue: string): void {
    this.listeners.notify(queue);
  }

  private checkOpen(): void {
    if (this.closed) throw new ClosedError('the etcd store');
  }
}

function consumerKey(queue: string, id: string): string {
  return `${queue}\0${id}`;
}
