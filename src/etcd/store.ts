/**
 * The etcd store: kvmq on etcd v3 with the etcds key protocol (docs/etcd.md).
 * Producers write straight into the ordered queue; a dispatcher elected per
 * queue among the processes that consume it hands messages to consumers,
 * which claim from their inbox and finish with guarded Txns. The etcd3
 * client library is loaded only when an etcd URL is opened.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { importDriver } from '../store/driver.js';
import { ClosedError, StoreUnavailableError } from '../errors.js';
import { clearQueue } from './clear.js';
import { LocalConsumer, type Delivery } from './consumer.js';
import { DispatcherHost } from './dispatcher/host.js';
import { enqueueMessages, submitEnqueues, type Answer } from './enqueue.js';
import { extendDeliveries, finishDeliveries, releaseDeliveries } from './finish.js';
import { writeReports } from './reports.js';
import { decodeReport } from '../store/report-codec.js';
import { getMany } from './txn-batch.js';
import { withProgress } from '../store/listing-progress.js';
import { runGc } from './gc.js';
import { liveConsumers, messageStatus, queueSize, stateCounts } from './inspect.js';
import { MAX_PAYLOAD_BYTES, QueueKeys } from './keys.js';
import {
  countDryRun,
  decodeConfig,
  decodeEoq,
  readConfig,
  resetDryRuns,
  writeConfig,
  type Eoq,
} from './queue-state.js';
import { parseEtcdUrl } from './url.js';
import type { DeliveryListener, DispatcherLog } from './dispatcher/types.js';
import type { Kv, Watch } from './kv.js';
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
import type { ListQuery } from '../model/list.js';
import type {
  ClaimRequest,
  ClaimResult,
  ClaimedMessage,
  CanceledMessage,
  Configured,
  ConsumerRegistration,
  EventPage,
  Finish,
  FinishResult,
  NewMessage,
  Report,
  Store,
  StoreCapabilities,
  StoredDetails,
  StoredPage,
  StoredSchedule,
} from '../store/contract.js';
import type { MessageEdit } from '../model/update.js';
import type {
  ActionResult,
  ConsumerInfo,
  EnqueueResult,
  GcResult,
  MessageStatus,
  QueueConfig,
  QueueStatus,
} from '../model/types.js';
import { parseFilterClass } from '../model/filters.js';

// How long a claim waits for the dispatcher to answer a request for more messages.
const ANSWER_WAIT_MS = 1000;
// How soon a claim that got no answer (no dispatcher yet) is worth repeating.
const UNANSWERED_RETRY_MS = 200;
// A queue size the dispatcher reported this recently is used as is.
const QUEUE_SIZE_FRESH_MS = 100;

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

interface QueueWatch {
  eoq: Eoq;
  config: QueueConfig | null;
  /** The mod revision of the configuration held (a watch event older than it is not applied). */
  configRev: number;
  watch: Watch;
}

// A claim on a paused queue asks the worker to look again within this long.
const PAUSED_RETRY_MS = 1000;

export class EtcdStore implements Store {
  readonly kind = 'etcd';
  readonly capabilities: StoreCapabilities = {
    maxPayloadBytes: MAX_PAYLOAD_BYTES,
    wakeups: true,
    instantRelease: true,
    deadLetterQueue: true,
    claimWithFinishes: false,
    overlapClaims: false,
    groupRateLimit: true,
    flows: false,
    // Finishes (and enqueueEach) go through a lane per queue (txn-lane.ts).
    groupCommit: true,
  };
  /** This process's id in the etcds protocol (the value of the election keys it holds). */
  readonly nodeId = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  readonly host: DispatcherHost;
  private readonly locals = new Map<string, { consumer: LocalConsumer; release: () => void }>();
  /** The same consumers by registration key, for deliveries this process's dispatcher makes. */
  private readonly byKey = new Map<string, LocalConsumer>();
  private readonly listeners = new Map<string, Set<() => void>>();
  private readonly cancelListeners = new Map<string, Set<(canceled: CanceledMessage | null) => void>>();
  private readonly queueWatches = new Map<string, Promise<QueueWatch>>();
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
    const [state] = await Promise.all([this.queueWatch(queue), this.register(queue)]);
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
    Promise.all([this.queueWatch(queue), this.register(queue)]).then(([state]) => {
      submitEnqueues(this.kv, this.keys(queue), messages, state.config?.events === true, answers);
    }, fail);
    return results;
  }

  async claim(queue: string, request: ClaimRequest): Promise<ClaimResult> {
    this.checkOpen();
    const consumer = this.consumer(queue, request.consumerId, { lockMs: request.lockMs });
    const keys = this.keys(queue);
    const state = await this.queueWatch(queue);
    if (state.config?.paused === true) {
      // Paused: nothing is taken, and no dry run counted. Deliveries made before the pause go back unrun.
      const unclaimed = consumer.unclaimed();
      if (unclaimed.length > 0) await releaseDeliveries(this.kv, keys, consumer, unclaimed);
      return {
        messages: [],
        queueSize: consumer.knownQueueSize(),
        dryRuns: state.eoq.dryRuns,
        wakeAt: Date.now() + PAUSED_RETRY_MS,
      };
    }
    const accepts =
      request.accepts === null
        ? null
        : acceptedPairs(state.config ?? (await readConfig(this.kv, keys)), request.accepts);
    // With group or rate limits a slot freed by another consumer's finish, or a new limit, is the dispatcher's to
    // hand out: ask, so the answer comes after it has seen them (a plain claim takes what its inbox holds).
    const limited =
      state.config?.groupConcurrency != null || state.config?.rateLimit != null || state.config?.groupRateLimit != null;
    const ask = limited && consumer.unclaimedCount() < request.max;
    await consumer.demand({ capacity: consumer.claimedCount() + request.max, lockMs: request.lockMs, accepts }, ask);
    const answered = await consumer.waitForAnswer(ANSWER_WAIT_MS, () => consumer.unclaimedCount() >= request.max);
    const taken = consumer.unclaimed().slice(0, request.max);
    if (taken.length > 0) {
      for (const d of taken) d.claimed = true;
      if (state.eoq.dryRuns !== 0 || state.eoq.until !== 0) await resetDryRuns(this.kv, keys);
      // The dispatcher locked them when it delivered, perhaps long before this claim: what is left now (read
      // after the claim was made), on this process's clock against the dispatcher's, never more than a lock.
      const now = Date.now();
      const renewed = await this.renewLate(keys, consumer, taken, request.lockMs, now);
      const messages: ClaimedMessage[] = taken
        .filter((d) => renewed.get(d.id) !== false)
        .map((d) => ({
          id: d.id,
          payload: d.payload,
          encoding: d.record.encoding,
          metadata: d.record.metadata,
          filters: parseFilterClass(d.record.filterClass),
          attempt: d.record.attempt,
          policy: d.record.policy,
          // Renewed during this claim, so after the worker sent it: a whole lock from the worker's send time.
          lockLeftMs:
            renewed.get(d.id) === true
              ? request.lockMs
              : Math.min(request.lockMs, (d.record.lockUntil ?? Infinity) - now),
        }));
      return { messages, queueSize: Math.max(...taken.map((d) => d.queueSize)), dryRuns: 0, wakeAt: null };
    }
    if (!answered) {
      // No dispatcher answered yet (one is being elected): look again soon, without counting a dry run.
      const size = await queueSize(this.kv, keys);
      return { messages: [], queueSize: size, dryRuns: state.eoq.dryRuns, wakeAt: Date.now() + UNANSWERED_RETRY_MS };
    }
    const rateWakeAt = consumer.rateWakeAt;
    if (rateWakeAt !== null && rateWakeAt > Date.now()) {
      // Held back by the queue's rate limit: sleep until the next slot (its delivery wakes the worker too).
      return { messages: [], queueSize: consumer.knownQueueSize(), dryRuns: state.eoq.dryRuns, wakeAt: rateWakeAt };
    }
    if (consumer.claimedCount() > 0) {
      // Busy, with nothing more for now: its handlers finishing, or a delivery, wake it. Not a dry run.
      return { messages: [], queueSize: consumer.knownQueueSize(), dryRuns: state.eoq.dryRuns, wakeAt: null };
    }
    // The dispatcher's answer says how long the queue was; a count reads it when that is old news.
    const size = consumer.freshQueueSize(QUEUE_SIZE_FRESH_MS) ?? (await queueSize(this.kv, keys));
    const eoq = await countDryRun(this.kv, keys, request.eoqBackoffMs);
    state.eoq = eoq.rev >= state.eoq.rev ? eoq : state.eoq;
    return { messages: [], queueSize: size, dryRuns: eoq.dryRuns, wakeAt: eoq.until };
  }

  /**
   * Deliveries that waited in the consumer's inbox for more than half a lock are renewed before the worker gets
   * them, as a held message's renewal would be: the time they spent unclaimed is not the handler's to lose. The
   * map says, per renewed id, whether this consumer still held it (false: the dispatcher gave it to another). A
   * renewal that fails leaves them as they are; the worker then judges each by the lock it has left.
   */
  private async renewLate(
    keys: QueueKeys,
    consumer: LocalConsumer,
    taken: readonly Delivery[],
    lockMs: number,
    now: number,
  ): Promise<Map<string, boolean>> {
    const renewed = new Map<string, boolean>();
    const late = taken.filter((d) => (d.record.lockUntil ?? Infinity) - now < lockMs / 2);
    if (late.length === 0) return renewed;
    try {
      const held = late.map((d) => ({ id: d.id, attempt: d.record.attempt }));
      const lost = new Set(await extendDeliveries(this.kv, keys, consumer, held, lockMs));
      for (const d of late) renewed.set(d.id, !lost.has(d.id));
    } catch {
      // The worker's own renewals go on; the lock left as delivered decides.
    }
    return renewed;
  }

  async extend(
    queue: string,
    consumerId: string,
    held: readonly { id: string; attempt: number }[],
    lockMs: number,
  ): Promise<string[]> {
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
    const config = (await this.queueWatch(queue)).config;
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
    const config = (await this.queueWatch(queue)).config;
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
    const watched = this.queueWatches.get(queue);
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
    const [state] = await Promise.all([this.queueWatch(queue), this.register(queue)]);
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
    let set = this.listeners.get(queue);
    if (set === undefined) {
      set = new Set();
      this.listeners.set(queue, set);
    }
    set.add(listener);
    const release = this.host.hold(queue);
    return () => {
      set.delete(listener);
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
    for (const state of this.queueWatches.values()) void state.then((s) => s.watch.cancel()).catch(() => undefined);
    this.queueWatches.clear();
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
    return (await this.queueWatch(queue)).config?.events === true;
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
    for (const listener of this.cancelListeners.get(queue) ?? []) listener(null);
  }

  /** Its holder's delivery goes in the cancel's Txn: the consumer's inbox watch sees it go (takenAway). */
  subscribeCancels(queue: string, listener: (canceled: CanceledMessage | null) => void): () => void {
    let set = this.cancelListeners.get(queue);
    if (set === undefined) {
      set = new Set();
      this.cancelListeners.set(queue, set);
    }
    set.add(listener);
    return () => set.delete(listener);
  }

  async cancel(queue: string, id: string, error: string): Promise<ActionResult> {
    this.checkOpen();
    const config = (await this.queueWatch(queue)).config;
    const dlq = config?.deadLetterQueue ?? null;
    const dlqKeys = dlq === null ? null : this.keys(dlq);
    return cancelMessage(this.kv, this.keys(queue), id, error, config?.events === true, dlqKeys);
  }

  async update(queue: string, id: string, edit: MessageEdit): Promise<ActionResult> {
    this.checkOpen();
    const config = (await this.queueWatch(queue)).config;
    return updateMessage(this.kv, this.keys(queue), id, edit, config?.events === true);
  }

  private notify(queue: string): void {
    const set = this.listeners.get(queue);
    if (set === undefined) return;
    for (const listener of set) listener();
  }

  /** The queue's dry-run state and configuration, kept current by one watch per queue. */
  private queueWatch(queue: string): Promise<QueueWatch> {
    let state = this.queueWatches.get(queue);
    if (state === undefined) {
      const keys = this.keys(queue);
      state = (async () => {
        const res = await this.kv.txn({
          compare: [],
          success: [
            { type: 'range', key: keys.eoq },
            { type: 'range', key: keys.config },
          ],
        });
        const [eoqRes, configRes] = res.responses;
        const eoqKv = eoqRes?.type === 'range' ? eoqRes.kvs[0] : undefined;
        const configKv = configRes?.type === 'range' ? configRes.kvs[0] : undefined;
        const s: QueueWatch = {
          eoq: decodeEoq(eoqKv?.value, eoqKv?.modRevision ?? 0),
          config: decodeConfig(keys, configKv?.value),
          configRev: configKv?.modRevision ?? 0,
          watch: { cancel: () => Promise.resolve() },
        };
        const handler = {
          events: (events: readonly import('./kv.js').WatchEvent[]) => {
            for (const e of events) {
              if (e.kv.key === keys.eoq) {
                s.eoq =
                  e.type === 'delete'
                    ? { dryRuns: 0, until: 0, rev: e.kv.modRevision }
                    : decodeEoq(e.kv.value, e.kv.modRevision);
              } else if (e.kv.key === keys.config && e.kv.modRevision > s.configRev) {
                s.configRev = e.kv.modRevision;
                try {
                  s.config = decodeConfig(keys, e.type === 'delete' ? undefined : e.kv.value);
                } catch {
                  s.config = null;
                }
              }
            }
          },
          broken: () => {
            this.queueWatches.delete(queue);
          },
        };
        // eoq and config sort next to each other only with the GC index between; two small watches instead.
        const w1 = this.kv.watch({ key: keys.eoq, startRevision: res.revision + 1 }, handler);
        const w2 = this.kv.watch({ key: keys.config, startRevision: res.revision + 1 }, handler);
        s.watch = {
          cancel: async () => {
            await Promise.all([w1.cancel(), w2.cancel()]);
          },
        };
        return s;
      })();
      this.queueWatches.set(queue, state);
      state.catch(() => this.queueWatches.delete(queue));
    }
    return state;
  }

  private checkOpen(): void {
    if (this.closed) throw new ClosedError('the etcd store');
  }
}

function consumerKey(queue: string, id: string): string {
  return `${queue}\0${id}`;
}

/** The `name=value` pairs a claim's class matcher accepts, over the queue's configured filter values. */
function acceptedPairs(config: QueueConfig, accepts: (filterClass: string) => boolean): string[] {
  const pairs: string[] = [];
  for (const [name, values] of Object.entries(config.filterEnums)) {
    for (const value of values) if (accepts(`${name}=${value}`)) pairs.push(`${name}=${value}`);
  }
  return pairs.sort();
}
