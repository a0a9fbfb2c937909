/**
 * A worker: claim → handler → finish, with lock renewal while handlers run,
 * messages claimed ahead (prefetch), batched finishes, queue-wide end-of-queue backoff, wake-ups from the store,
 * handler timeouts, outcome events, the consumer registry, GC, the queue's schedules, and a graceful (then
 * forceful) stop.
 */
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import { classMatcher } from '../model/filters.js';
import { decodePayload } from '../model/payload.js';
import { expBackoff } from '../model/backoff.js';
import { checkMs, checkQueueName, checkTurnName } from '../model/validate.js';
import { checkWorkerOptions, type AnyWorkerOptions, type CheckedWorkerOptions } from './options.js';
import { decodePolicy, EXPIRED_ERROR, expired, policyBackoffMs } from '../model/policy.js';
import {
  finishFromFailure,
  finishFromResult,
  finishFromThrow,
  thrownText,
  timeoutError,
  type AttemptFinish,
} from './outcome.js';
import { failAll, finishesFromBatch, type BatchMember, type CheckedBatchOptions } from './batch.js';
import type { WorkerEvents } from './events.js';
import type { SharedSchedulers } from '../schedule/shared.js';
import type { WorkerInstruments } from './instruments.js';
import type {
  CanceledMessage,
  ClaimResult,
  ClaimedMessage,
  Finish,
  FinishResult,
  HandlerTransaction,
  HandoffReceiver,
  Store,
} from '../store/contract.js';
import { setLongTimeout, sleep } from '../model/time.js';
import { CanceledError, JobReportError, KvmqError, StoreUnavailableError } from '../errors.js';
import { MessageReports, ReportWriter } from './reports.js';
import { UNTRACED, traceProcess } from '../tracing/process.js';
import { abortSignal, HeldJob, takeAway, type Held } from './held.js';
import type { BatchHandler, Handler, HandlerResult, Job, MessageStatus, QueueConfig } from '../model/types.js';

export type { WorkerOptions, BatchWorkerOptions, MonitorInfo, Monitor, Logger } from './options.js';
export type { BatchOptions } from './batch.js';
export type {
  CompletedEvent,
  FailedEvent,
  FailureReason,
  RetryingEvent,
  StalledEvent,
  WorkerEvents,
} from './events.js';

type WorkerState = 'idle' | 'running' | 'stopping' | 'stopped';

interface Waiting {
  readonly held: Held;
  readonly message: ClaimedMessage;
}

interface PendingFinish {
  readonly finish: Finish;
  readonly resolve: (result: FinishResult) => void;
  /** Called only with the stop's give-up reason: the store never took this finish. */
  readonly reject: (reason: unknown) => void;
}

// How long a failing store call waits before the next try, at most: once the store is back, a worker resumes
// within this (or sooner, when another of its calls gets through first; see storeAnswered).
const MAX_ERROR_BACKOFF_MS = 5000;
// ...and while stopping, when only a few seconds (stopGraceMs) are left to store what the worker holds.
const MAX_STOPPING_BACKOFF_MS = 1000;
// A message is given up this long before its lock can end at the earliest (a timer fires late by a little).
const MAX_FENCE_MARGIN_MS = 250;
// Fewer slots than this never claim ahead: few messages a round trip leave little client work to overlap, and a
// worker of few slots is often one of many sharing a queue (messages claimed ahead are not theirs to take).
const MIN_OVERLAP_SLOTS = 8;
// Cancels of messages not held are remembered this many at most (a claim's answer arrives within moments).
const RECENT_CANCELS = 1000;

/** Listeners for `completed`, `failed`, `retrying`, `stalled` and `error`: see WorkerEvents. */
export class Worker extends EventEmitter<WorkerEvents> {
  /** This worker's consumer id, as the registry shows it. */
  readonly id = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  readonly queue: string;
  readonly autoStart: boolean;
  private readonly options: CheckedWorkerOptions;
  /** Every message this worker holds: waiting for a slot, in a handler, or finishing. */
  private readonly held = new Map<string, Held>();
  /** Claimed ahead, not yet started, oldest first. */
  private waiting: Waiting[] = [];
  /** Handler calls running now (at most `concurrency`; with `batch`, each call runs a batch). */
  private handlersRunning = 0;
  /** Held messages whose handler returned: their results travel to the store while the next claim does. */
  private handlersDone = 0;
  /** Each handling under way, until its result is stored; stop() waits for them. */
  private readonly handlers = new Map<Held, Promise<void>>();
  /** Aborted by the first stop: no more polling. */
  private readonly halt = new AbortController();
  /** Aborted by the second stop: no more waiting for handlers. */
  private readonly force = new AbortController();
  /**
   * Aborted `stopGraceMs` after a stop's handlers have returned (or after the second stop): no more waiting for the
   * store. What it has not taken is left to the locks.
   */
  private readonly giveUp = new AbortController();
  /** giveUp was aborted: read on every finish, where a plain field costs less than the signal's getters. */
  private storeGivenUp = false;
  /** What finishes the store never took are rejected with, once the stop gave up: counted, not reported one by one. */
  private readonly leftToLocks = new Error('the stop gave up on the store');
  private giveUpTimer: NodeJS.Timeout | null = null;
  /** Finishes waiting for the next flush, or for the store to come back. */
  private finishes: PendingFinish[] = [];
  /** The batch of finishes the store is working on. */
  private sending: readonly PendingFinish[] = [];
  /** Single finishes the store is working on (group-commit stores). */
  private sendingAlone = 0;
  /** The forced stop's releases, until the store takes them. */
  private releasing: Promise<unknown> | null = null;
  /** The consumer is registered (a stop unregisters it). */
  private registered = false;
  /** The last store failure, for the stop that gives up. */
  private lastStoreError: unknown = null;
  /** Aborted when a store call succeeds after failures: every loop waiting out a failure's backoff tries again. */
  private storeBack = new AbortController();
  private flushScheduled = false;
  private state: WorkerState = 'idle';
  private accepts: ((filterClass: string) => boolean) | null = null;
  private woken = false;
  /** The claim loop waits for a slot (not for messages): a finish on its way or stored wakes it. */
  private full = false;
  /** The last claim came back empty while messages were held: the last of them to leave asks again. */
  private dryWhileHeld = false;
  /** Claims go out while finishes travel (see freeSlots). */
  private readonly claimWithFinishes: boolean;
  /** With a backlog and quick handlers, send the next claim as an answer arrives (see claimAhead). */
  private readonly overlap: boolean;
  /** The last answer left ready messages behind. */
  private backlog = false;
  private wake: (() => void) | null = null;
  private starting: Promise<void> | null = null;
  private loop: Promise<void> | null = null;
  private unsubscribe: (() => void) | null = null;
  /** Messages the store claims for this worker while it waits with free slots, where it does (accept-all only). */
  private handoffs: HandoffReceiver | null = null;
  private renewTimer: NodeJS.Timeout | null = null;
  /** One timer for the earliest fence of the held messages (see fence()); null while none is armed. */
  private fenceTimer: NodeJS.Timeout | null = null;
  private fenceTimerAt = Infinity;
  /** performance.now() when the last claim was sent. */
  private claimSentAt = 0;
  /** How long before a lock's proven end the worker gives its message up. */
  private readonly fenceMarginMs: number;
  /** The renewal under way, if any; stop() waits for it, and renewals never overlap. */
  private renewing: Promise<void> | null = null;
  /** A cancel was heard while a renewal was on its way, which may have left before it: renew once more. */
  private renewAgain = false;
  private unsubscribeCancels: (() => void) | null = null;
  /** Cancels heard for messages not held here (yet), id → attempt: one whose claim arrives later is not run. */
  private readonly recentCancels = new Map<string, number>();
  /** The GC and configuration loop; stop() waits for it so no store call outlives the worker. */
  private maintenance: Promise<void> | null = null;
  /** This worker's part in the client's scheduler of the queue (option `schedules`); stop() waits for it. */
  private scheduling: Promise<void> | null = null;
  private stopping: Promise<void> | null = null;
  private storeFailures = 0;
  /** Store calls under way besides claims and results (a monitor's takeTurn, a give-back); stop() waits for them. */
  private readonly monitoring = new Set<PromiseLike<unknown>>();
  /** With `batch`: the wait for a fuller batch, while one is armed. */
  private batchTimer: NodeJS.Timeout | null = null;
  /** The wait for a fuller batch ran out: the next free handler takes what is ready. */
  private batchWaitOver = false;
  /** Writes handlers' reports (job.progress, job.log); made on the first. */
  private writer: ReportWriter | null = null;
  /** @internal set by the client when its metrics are asked for; null costs the hot path nothing. */
  instruments: WorkerInstruments | null = null;

  /** @internal use `client.worker()` */
  constructor(
    private readonly store: Store,
    queue: string,
    private readonly handler: Handler | BatchHandler,
    options: AnyWorkerOptions,
    private readonly onStopped: () => void,
    private readonly schedulers: SharedSchedulers,
  ) {
    // A listener's rejected promise comes to [captureRejectionSymbol] instead of going unhandled.
    super({ captureRejections: true });
    this.queue = checkQueueName(queue);
    if (typeof handler !== 'function') throw new TypeError('worker handler must be a function (job) => result');
    this.options = checkWorkerOptions(options);
    this.autoStart = this.options.autoStart;
    if (this.options.transactional && store.beginHandlerTransaction === undefined) {
      throw new TypeError(
        `transactional is not available on this ${store.kind} store: only a PostgreSQL store (postgres://) can run ` +
          "a handler in a transaction with the message's outcome",
      );
    }
    if (this.options.transactional && this.options.batch !== null) {
      throw new TypeError("transactional and batch do not go together: a transaction holds one message's outcome");
    }
    this.fenceMarginMs = Math.min(MAX_FENCE_MARGIN_MS, this.options.lockMs / 10);
    this.claimWithFinishes = store.capabilities.claimWithFinishes;
    this.overlap =
      this.claimWithFinishes &&
      store.capabilities.overlapClaims &&
      this.options.throttleMs === 0 &&
      this.slots() >= MIN_OVERLAP_SLOTS;
  }

  get running(): boolean {
    return this.state === 'running';
  }

  /** Messages this worker holds now. */
  get inFlight(): number {
    return this.held.size;
  }

  /**
   * Registers the consumer and starts polling. Rejects if the worker cannot run at all: its filters do not fit the
   * queue, the store refuses its credentials or holds a foreign layout (an error that is not `transient`). A store
   * that is unavailable does not stop it: start() resolves after the first failure, and the worker keeps trying in
   * the background, with backoff, reporting each failure to `onError`.
   */
  start(): Promise<void> {
    if (this.state !== 'idle') {
      return Promise.reject(new Error(`worker is ${this.state}; create a new worker to start again`));
    }
    this.state = 'running';
    return new Promise((resolve, reject) => {
      let settled = false;
      const trying = (): void => {
        settled = true;
        resolve();
      };
      this.starting = this.begin(trying);
      this.starting.then(trying, (error: unknown) => {
        // Already resolved while the store was down: the worker has stopped, and says why.
        if (settled) this.reportError(error);
        else reject(error instanceof Error ? error : new Error(String(error)));
        settled = true;
      });
    });
  }

  /** @internal `client.worker()` with autoStart: nobody awaits start(), so a refusal goes where other errors go. */
  startInBackground(): void {
    this.start().catch(this.reportError);
  }

  /** Joins the queue, then starts the loops; `trying` is called when a first try failed and the worker goes on. */
  private async begin(trying: () => void): Promise<void> {
    try {
      await this.join(trying);
    } catch (error) {
      this.state = 'stopped';
      this.onStopped();
      throw error;
    }
    // stop() came while starting: it unregisters; start nothing.
    if (this.state !== 'running') return;
    this.unsubscribe = this.store.subscribe(this.queue, () => this.kick());
    this.unsubscribeCancels = this.store.subscribeCancels(this.queue, this.canceled);
    if (this.accepts === null && this.store.receiveHandoffs !== undefined) {
      this.handoffs = this.store.receiveHandoffs(this.queue, this.id, {
        delivered: (messages, size, since) => this.handed(messages, size, since),
        ready: () => this.kick(),
        failed: this.reportError,
      });
    }
    const renewEveryMs = Math.max(50, Math.floor(this.options.lockMs / 3));
    this.renewTimer = setInterval(() => {
      this.renewing ??= this.renew().finally(() => (this.renewing = null));
    }, renewEveryMs);
    this.loop = this.run();
    this.maintenance = this.maintain();
    if (this.options.schedules) this.scheduling = this.schedulers.join(this.queue, this.reportError, this.halt.signal);
  }

  /**
   * Reads the queue's configuration and registers the consumer. A transient failure is reported and tried again
   * with backoff until it succeeds or a stop comes; any other failure is thrown.
   */
  private async join(trying: () => void): Promise<void> {
    while (!this.halt.signal.aborted) {
      try {
        await this.refreshConfig();
        await this.register();
        this.registered = true;
        this.storeAnswered();
        return;
      } catch (error) {
        if (!(error instanceof KvmqError && error.transient)) throw error;
        this.instruments?.storeError(this.queue, 'renew');
        trying();
        await this.storeFailed(error, this.halt.signal);
      }
    }
  }

  /**
   * Stops polling and waits for running handlers to finish and their results
   * to reach the store. Called again while stopping, it stops at once: running
   * handlers are aborted and their messages released for others. Either way it
   * waits for the store at most `stopGraceMs` once the handlers have returned.
   */
  async stop(): Promise<void> {
    if (this.state === 'idle' || this.state === 'stopped') {
      this.state = 'stopped';
      return;
    }
    if (this.stopping !== null) {
      this.forceStop();
      return this.stopping;
    }
    this.state = 'stopping';
    this.halt.abort();
    this.kick();
    if (this.handlersRunning === 0) this.startGraceTimer();
    this.stopping = this.drain();
    return this.stopping;
  }

  private async drain(): Promise<void> {
    await this.storeWait(this.starting);
    if (this.state === 'stopped') return; // start failed and cleaned up
    await this.storeWait(this.loop);
    // What was handed over and not started yet waits with the prefetched messages, and goes back with them.
    await this.storeWait(this.handoffs?.close());
    await this.giveBackWaiting();
    // A handler settles only once its result reached the store, so this also waits for the finishes.
    await Promise.race([Promise.allSettled(this.handlers.values()), aborted(this.force.signal), this.givenUp()]);
    // Forced: the messages released, and the results already on their way, are still worth storing.
    if (this.force.signal.aborted) await this.storeWait(Promise.all([this.releasing, ...this.finishingHandlers()]));
    if (this.renewTimer !== null) clearInterval(this.renewTimer);
    if (this.batchTimer !== null) clearTimeout(this.batchTimer);
    await this.storeWait(this.renewing);
    this.disarmFence();
    await this.storeWait(this.maintenance);
    await this.storeWait(this.scheduling);
    await this.storeWait(Promise.allSettled(this.monitoring));
    this.unsubscribe?.();
    this.unsubscribeCancels?.();
    if (this.registered) await this.storeWait(this.store.unregisterConsumer(this.queue, this.id));
    if (this.giveUpTimer !== null) clearTimeout(this.giveUpTimer);
    this.leaveToLocks();
    this.state = 'stopped';
    this.onStopped();
  }

  /** Starts the stop's last wait for the store (stopGraceMs), once: the handlers have returned, or a forced stop. */
  private startGraceTimer(): void {
    if (this.giveUpTimer !== null) return;
    this.giveUpTimer = setTimeout(() => {
      this.storeGivenUp = true;
      this.giveUp.abort(this.leftToLocks);
    }, this.options.stopGraceMs);
  }

  /** Waits for store work until the stop gives up on the store; a failure that comes first is reported. */
  private async storeWait(work: Promise<unknown> | null | undefined): Promise<void> {
    if (work == null) return;
    const reported = work.catch((error: unknown) => {
      if (!this.giveUp.signal.aborted) this.reportError(error);
    });
    await Promise.race([reported, this.givenUp()]);
  }

  /** The stop gave up on the store. */
  private gaveUp(): boolean {
    return this.storeGivenUp;
  }

  private givenUp(): Promise<void> {
    return aborted(this.giveUp.signal);
  }

  /** Handlings whose result is on its way to the store (the others were taken away by a forced stop). */
  private finishingHandlers(): Promise<void>[] {
    return [...this.handlers].filter(([held]) => held.finishing && !held.takenAway).map(([, handling]) => handling);
  }

  /**
   * After the stop gave up on the store: the finishes it never took are dropped, their messages left to their locks
   * (another worker handles them once the locks end), and one error says how many.
   */
  private leaveToLocks(): void {
    if (!this.giveUp.signal.aborted) return;
    const left = this.finishes.length + this.sending.length + this.sendingAlone;
    const dropped = this.finishes;
    this.finishes = [];
    for (const pending of dropped) pending.reject(this.leftToLocks);
    if (left === 0) return;
    this.reportError(
      new StoreUnavailableError(
        `worker ${this.id} stopped without storing the outcome of ${left} message(s) of queue '${this.queue}': ` +
          `the store did not take them within stopGraceMs (${this.options.stopGraceMs} ms); unless it still ` +
          'takes the calls already sent, they stay locked until their locks end, then another worker handles them',
        this.lastStoreError ?? undefined,
      ),
    );
  }

  /** Prefetched messages no handler started go back to the queue (their next claim is a new attempt). */
  private async giveBackWaiting(): Promise<void> {
    const waiting = this.waiting;
    this.waiting = [];
    const released: Finish[] = [];
    for (const { held } of waiting) {
      if (held.takenAway) {
        this.held.delete(held.id);
        continue;
      }
      held.finishing = true;
      released.push(giveBackOf(held));
    }
    if (released.length === 0) return;
    await this.storeWait(Promise.all(released.map((finish) => this.finish(finish))));
    for (const finish of released) this.held.delete(finish.id);
  }

  private forceStop(): void {
    if (this.force.signal.aborted) return;
    this.force.abort();
    this.startGraceTimer();
    const released: Finish[] = [];
    for (const held of this.held.values()) {
      if (held.finishing) continue;
      takeAway(held, new Error('worker stopped'));
      released.push({
        id: held.id,
        attempt: held.attempt,
        outcome: 'retry',
        backoffMs: 0,
        error: 'worker stopped',
        startedAt: null,
      });
    }
    // Retried like any finish until the store takes them or the stop gives up on it.
    if (released.length === 0) return;
    // Their only failure is the stop giving up, which its own error counts.
    this.releasing = Promise.all(released.map((finish) => this.finish(finish))).catch(() => undefined);
  }

  /**
   * The claim loop: one claim at a time, so the messages of one answer rank at or above the next's. Where the
   * store overlaps claims and the handlers return within a round trip, the next claim is sent as an answer with a
   * backlog arrives (`ahead`), before that answer's handlers start: the store works on it while they run and
   * while their finishes travel, instead of each side waiting for the other.
   */
  private async run(): Promise<void> {
    let ahead: Promise<ClaimResult> | null = null;
    let aheadSentAt = 0;
    while (this.state === 'running') {
      let claim = ahead;
      let sentAt = aheadSentAt;
      ahead = null;
      if (claim === null) {
        const max = this.freeSlots();
        if (max <= 0) {
          this.woken = false;
          this.full = true;
          await this.idle(Infinity);
          this.full = false;
          continue;
        }
        this.woken = false;
        claim = this.claim(max);
        sentAt = this.claimSentAt;
      }
      let claimed: readonly ClaimedMessage[];
      let wakeAt: number | null;
      try {
        const result = await claim;
        this.storeAnswered();
        ({ messages: claimed, wakeAt } = result);
        // The last answer's handlers have all returned before this one came: so will this one's, likely.
        const quick = this.backlog && this.handlersRunning === 0 && this.waiting.length === 0;
        this.dryWhileHeld = claimed.length === 0 && this.held.size > 0;
        for (const message of claimed) this.accept(message, sentAt);
        // A claim that drained the queue says so with a wakeAt: the next claim would find nothing.
        this.backlog = claimed.length > 0 && wakeAt === null;
        if (this.overlap && this.backlog && quick) {
          ahead = this.claimAhead(claimed.length);
          aheadSentAt = this.claimSentAt;
        }
        // Started before the monitor hears of them: a monitor that stops the worker stops what comes after.
        this.startWaiting();
        this.report(result.queueSize, result.dryRuns, claimed);
      } catch (error) {
        this.backlog = false;
        this.instruments?.storeError(this.queue, 'claim');
        await this.storeFailed(error, this.halt.signal);
        continue;
      }
      if (!this.backlog) await this.idle(wakeAt === null ? Infinity : wakeAt - Date.now());
      else if (this.options.throttleMs > 0) await sleep(this.options.throttleMs, this.halt.signal);
    }
    // Stopped with a claim on its way: its messages wait, and the stop gives them back.
    if (ahead !== null) await this.acceptLate(ahead, aheadSentAt);
  }

  private claim(max: number): Promise<ClaimResult> {
    // Read once: metrics attached during the claim start with the next one, not with a clock never read.
    const instruments = this.instruments;
    // Before the request leaves: the locks it takes count from no earlier than this.
    const claimStart = performance.now();
    this.claimSentAt = claimStart;
    const claim = this.store.claim(this.queue, {
      consumerId: this.id,
      max,
      lockMs: this.options.lockMs,
      accepts: this.accepts,
      eoqBackoffMs: (n) => this.options.eoqBackoffMs(Math.min(n, 5) - 1),
    });
    if (instruments === null) return claim;
    return claim.then((result) => {
      instruments.claimed(this.queue, (performance.now() - claimStart) / 1000, result.messages.length);
      return result;
    });
  }

  /**
   * The next claim, sent before this answer's handlers start, for as many messages as it brought: their handlers
   * will have returned when it arrives (see `quick`), so its messages start on arrival. At most twice the slots
   * are held besides the messages whose finish is on its way. Null when none.
   */
  private claimAhead(answered: number): Promise<ClaimResult> | null {
    // An answer that came during a stop: its messages go back, and nothing more is claimed.
    if (this.state !== 'running') return null;
    const max = Math.min(answered, 2 * this.slots() - (this.held.size - this.handlersDone));
    if (max <= 0) return null;
    this.woken = false;
    const claim = this.claim(max);
    // Awaited by the loop's next turn; marked handled should a store failure make that turn wait first.
    claim.catch(() => undefined);
    return claim;
  }

  private async acceptLate(claim: Promise<ClaimResult>, sentAt: number): Promise<void> {
    try {
      for (const message of (await claim).messages) this.accept(message, sentAt);
    } catch (error) {
      this.instruments?.storeError(this.queue, 'claim');
      this.reportError(error);
    }
  }

  /** Messages this worker holds at most (besides finishes on their way): a batch takes `size` of them. */
  private slots(): number {
    const { concurrency, prefetch, batch } = this.options;
    return concurrency * (batch?.size ?? 1) + prefetch;
  }

  /**
   * How many messages the next claim may take. A message whose handler returned no longer takes a slot, so the
   * next claim travels with the finishes; at most as many again wait on their finishes (a store that refuses
   * finishes stops the claims). A store without `claimWithFinishes` is asked once the finishes are stored.
   */
  private freeSlots(): number {
    const slots = this.slots();
    if (!this.claimWithFinishes) return slots - this.held.size;
    return Math.min(slots - (this.held.size - this.handlersDone), 2 * slots - this.held.size);
  }

  /** Messages an enqueue claimed for this worker while it waited: they start as a claim's would. */
  private handed(messages: readonly ClaimedMessage[], queueSize: number, since: number): void {
    this.instruments?.handedOff(this.queue, messages.length);
    for (const message of messages) this.accept(message, since);
    this.startWaiting();
    this.report(queueSize, 0, messages);
  }

  /** Holds a claimed message; `since`: when the request that locked it was sent (see ClaimedMessage.lockLeftMs). */
  private accept(message: ClaimedMessage, since: number): void {
    // Its cancel was heard before the claim's answer (another connection, a handoff on its way): never run.
    if (this.recentCancels.get(message.id) === message.attempt) return;
    const prior = this.held.get(message.id);
    if (prior !== undefined) {
      // The attempt held here, delivered again (a store that lists its deliveries anew after a reconnect, while
      // this attempt's finish waits for it): the one held settles it, and it is not run twice.
      if (prior.attempt === message.attempt) return;
      // An earlier attempt's handler still runs here (its lock ended, or this answer proves it did): the new
      // attempt is not started beside it, and its lock is left to end (the prior handler was told to stop).
      if (prior.startedAt > 0 && !prior.finishing) {
        this.lost(prior);
        this.refuse(message);
        return;
      }
    }
    const fenceAt = since + message.lockLeftMs - this.fenceMarginMs;
    const held: Held = {
      id: message.id,
      attempt: message.attempt,
      controller: null,
      abortReason: null,
      takenAway: false,
      finishing: false,
      fenceAt,
      startedAt: 0,
      startedAtWall: 0,
      policy: decodePolicy(message.policy),
      cause: 'handler',
      trace: UNTRACED,
      transaction: null,
      reports: null,
    };
    this.held.set(message.id, held);
    this.waiting.push({ held, message });
    // Claims come in order, so a later fence rarely needs the timer moved: one comparison on the hot path.
    const at = Math.min(fenceAt, this.sessionFence());
    if (at < this.fenceTimerAt) this.armFence(at);
  }

  /**
   * Starts waiting messages while slots are free. One whose lock was lost meanwhile is dropped; one whose lock
   * ends (nearly) now is not started: it is reported lost and handed back (see unstarted).
   */
  private startWaiting(): void {
    const { batch } = this.options;
    if (batch !== null) {
      this.startBatches(batch);
      return;
    }
    while (this.state === 'running' && this.handlersRunning < this.options.concurrency && this.waiting.length > 0) {
      const now = performance.now();
      const next = this.nextStartable(now);
      if (next !== null) this.handle(next.held, next.message, now);
    }
  }

  /** The oldest waiting message, taken from the queue; null when it can no longer start (see startWaiting). */
  private nextStartable(now: number): Waiting | null {
    const next = this.waiting.shift() as Waiting;
    const { held } = next;
    if (!held.takenAway && now >= held.fenceAt) this.unstarted(held, staleLockError(held));
    if (!held.takenAway) return next;
    if (this.held.get(held.id) === held) this.held.delete(held.id);
    return null;
  }

  /**
   * With `batch`: starts a batch of waiting messages per free handler, a full one if that many wait; fewer once
   * `waitMs` has passed since a free handler first found fewer (at once with 0). Their locks are renewed meanwhile,
   * as every held message's.
   */
  private startBatches({ size, waitMs }: CheckedBatchOptions): void {
    while (this.state === 'running' && this.handlersRunning < this.options.concurrency && this.waiting.length > 0) {
      if (this.waiting.length < size && waitMs > 0 && !this.batchWaitOver) {
        this.batchTimer ??= setTimeout(() => {
          this.batchTimer = null;
          this.batchWaitOver = true;
          this.startWaiting();
        }, waitMs);
        return;
      }
      if (this.batchTimer !== null) clearTimeout(this.batchTimer);
      this.batchTimer = null;
      this.batchWaitOver = false;
      const now = performance.now();
      const batch: Waiting[] = [];
      while (batch.length < size && this.waiting.length > 0) {
        const next = this.nextStartable(now);
        if (next !== null) batch.push(next);
      }
      if (batch.length > 0) this.handleBatch(batch, now);
    }
  }

  private handle(held: Held, message: ClaimedMessage, now: number): void {
    this.handlersRunning += 1;
    const job = this.jobOf(held, message, now);
    this.handlers.set(held, this.process(held, this.attemptOne(held, job)));
  }

  /** One handler call for the batch; each message's outcome is then stored on its own, as a single message's. */
  private handleBatch(waiting: readonly Waiting[], now: number): void {
    // One past its time to live fails alone, as handle() fails it, and never reaches the batch's handler.
    const wallNow = Date.now();
    const batch: Waiting[] = [];
    for (const w of waiting) {
      if (this.pastTimeToLive(w.held, wallNow)) this.handle(w.held, w.message, now);
      else batch.push(w);
    }
    if (batch.length === 0) return;
    this.handlersRunning += 1;
    const helds = batch.map((w) => w.held);
    const jobs = batch.map(({ held, message }) => this.jobOf(held, message, now));
    const finishes = this.attemptBatch(helds, jobs);
    helds.forEach((held, i) => {
      const attempted = finishes.then((all) => all[i] as AttemptFinish);
      this.handlers.set(held, this.process(held, attempted));
    });
  }

  /** Marks the message's handling started and makes its job. */
  private jobOf(held: Held, message: ClaimedMessage, now: number): Job {
    held.startedAt = now;
    held.startedAtWall = Date.now();
    held.trace = traceProcess(this.queue, this.id, message);
    const payload = decodePayload(message.payload, message.encoding);
    return new HeldJob(this.queue, message.id, payload, message.metadata, message.filters, message.attempt, held, this);
  }

  private async attemptOne(held: Held, job: Job): Promise<AttemptFinish> {
    try {
      if (this.pastTimeToLive(held, held.startedAtWall)) return this.expiredFinish(held);
      return this.options.transactional ? await this.attemptInTransaction(held, job) : await this.attempt(held, job);
    } finally {
      this.handlerReturned(1);
    }
  }

  /**
   * A handler call returned (or timed out). Its slots are free: a prefetched message starts while its results
   * travel, and the next claim goes out with the batch of finishes (flush).
   */
  private handlerReturned(messages: number): void {
    this.handlersRunning -= 1;
    this.handlersDone += messages;
    // The last handler of a stop has returned: the store gets stopGraceMs more to take the results.
    if (this.handlersRunning === 0 && this.state === 'stopping') this.startGraceTimer();
    this.startWaiting();
  }

  /** One message's handling once its attempt is under way: its finish stored, then everything it held let go. */
  private async process(held: Held, attempted: Promise<AttemptFinish>): Promise<void> {
    try {
      await this.record(held, held.trace.outcome(await attempted, held.cause));
    } catch (error) {
      // Dropped by a stop that gave up on the store: counted in its one error.
      if (error !== this.leftToLocks) this.reportError(error);
    } finally {
      // Taken away, thrown, or its commit failed: whatever the handler wrote is undone.
      held.transaction?.rollback().catch(this.reportError);
      held.trace.end(held);
      if (this.held.get(held.id) === held) this.held.delete(held.id);
      this.handlersDone -= 1;
      this.handlers.delete(held);
      // Without claimWithFinishes the slot frees only now (and ZooKeeper's finish claimed for this next claim).
      // After a dry claim, the last result stored asks once more, so a monitor sees a dry claim with nothing in
      // flight (the CLI's --idle-exit-ms waits for one) even when the wait is a rate limit's next slot.
      const lastAfterDry = this.dryWhileHeld && this.held.size === 0;
      if (lastAfterDry) this.dryWhileHeld = false;
      // A worker that takes handoffs and waits for messages claims again: the claim parks the freed slot too.
      const parkAgain = this.handoffs !== null && !this.backlog;
      if (this.full || !this.claimWithFinishes || lastAfterDry || parkAgain) this.kick();
    }
  }

  /**
   * The attempt inside a transaction the store opens for it (option `transactional`). One that cannot be opened
   * is a retry at once, the handler not run.
   */
  private async attemptInTransaction(held: Held, job: Job): Promise<AttemptFinish> {
    try {
      held.transaction = (await this.store.beginHandlerTransaction?.()) ?? null;
    } catch (error) {
      this.instruments?.storeError(this.queue, 'finish');
      held.cause = 'thrown';
      const message = `could not open the handler's transaction: ${error instanceof Error ? error.message : String(error)}`;
      return { id: held.id, attempt: held.attempt, outcome: 'retry', backoffMs: 0, error: message };
    }
    return this.attempt(held, job);
  }

  /**
   * Past its time to live at its first delivery (a retried attempt had started in time). The property read is all
   * a message without one costs.
   */
  private pastTimeToLive(held: Held, wallNow: number): boolean {
    return held.policy?.expireAt !== undefined && held.attempt === 1 && expired(held.policy, wallNow);
  }

  private expiredFinish(held: Held): AttemptFinish {
    held.cause = 'expired';
    return { id: held.id, attempt: held.attempt, outcome: 'error', backoffMs: 0, error: EXPIRED_ERROR };
  }

  private attempt(held: Held, job: Job): Promise<AttemptFinish> {
    const timeoutMs = held.policy?.timeoutMs ?? this.options.timeoutMs;
    // No extra promise on the way when there is no timeout.
    return timeoutMs === null ? this.invoke(held, job) : this.invokeWithin(held, job, timeoutMs);
  }

  /** The handler's finish, or the timeout's if `timeoutMs` passes first (the handler's late result is dropped). */
  private async invokeWithin(held: Held, job: Job, timeoutMs: number): Promise<AttemptFinish> {
    const first = await within(this.invoke(held, job), timeoutMs);
    return first === 'timeout' ? this.timedOut(held, timeoutMs) : first;
  }

  /**
   * A batch's handler call: one finish per message. Its timeout is the shortest of its messages' (or the
   * worker's); a timeout or a throw fails each message under its own attempts.
   */
  private async attemptBatch(batch: readonly Held[], jobs: readonly Job[]): Promise<AttemptFinish[]> {
    try {
      let timeoutMs: number | null = this.options.timeoutMs;
      for (const held of batch) {
        const own = held.policy?.timeoutMs;
        if (own !== undefined && (timeoutMs === null || own < timeoutMs)) timeoutMs = own;
      }
      const invoked = this.invokeBatch(batch, jobs);
      const first = timeoutMs === null ? await invoked : await within(invoked, timeoutMs);
      return first === 'timeout' ? batch.map((held) => this.timedOut(held, timeoutMs as number)) : first;
    } finally {
      this.handlerReturned(batch.length);
    }
  }

  private async invokeBatch(batch: readonly Held[], jobs: readonly Job[]): Promise<AttemptFinish[]> {
    const members: BatchMember[] = batch.map((held) => ({
      id: held.id,
      attempt: held.attempt,
      maxAttempts: this.maxAttempts(held),
      retryBackoffMs: this.retryBackoff(held),
    }));
    const handler = this.handler as BatchHandler;
    try {
      // One call, run in the first message's span: the others' spans record their own outcomes.
      const returned = await (batch[0] as Held).trace.run(() => handler(jobs), jobs[0] as Job);
      const { finishes, wrongLength } = finishesFromBatch(members, returned);
      if (wrongLength) for (const held of batch) held.cause = 'thrown';
      return finishes;
    } catch (thrown) {
      for (const held of batch) if (held.cause !== 'timeout') held.cause = 'thrown';
      return failAll(members, thrownText(thrown));
    }
  }

  private async invoke(held: Held, job: Job): Promise<AttemptFinish> {
    try {
      const result: HandlerResult | void = await held.trace.run(this.handler as Handler, job);
      return finishFromResult(job.id, job.attempt, result);
    } catch (thrown) {
      // A throw after the timeout (often the abort itself) changes nothing: the timeout was recorded.
      if (held.cause !== 'timeout') held.cause = 'thrown';
      return finishFromThrow(job.id, job.attempt, thrown, this.maxAttempts(held), this.retryBackoff(held));
    }
  }

  private timedOut(held: Held, timeoutMs: number): AttemptFinish {
    held.cause = 'timeout';
    const reason = timeoutError(timeoutMs);
    abortSignal(held, reason);
    return finishFromFailure(held.id, held.attempt, reason.message, this.maxAttempts(held), this.retryBackoff(held));
  }

  private maxAttempts(held: Held): number {
    return held.policy?.attempts ?? this.options.maxAttempts;
  }

  private retryBackoff(held: Held): (attempt: number) => number {
    const backoff = held.policy?.backoff;
    return backoff === undefined ? this.options.retryBackoffMs : (attempt) => policyBackoffMs(backoff, attempt);
  }

  /** Stores the attempt's finish, then tells listeners what the store kept. */
  private async record(held: Held, attemptFinish: AttemptFinish): Promise<void> {
    const durationMs = performance.now() - held.startedAt;
    this.instruments?.handlerEnded(this.queue, durationMs / 1000);
    // A lost lock or a forced stop: the message is someone else's now.
    if (held.takenAway) return;
    held.finishing = true;
    // What the handler reported goes first: the finish is its last write, and nothing comes after it.
    if (held.reports !== null) await this.writer?.settle(held.reports);
    const finish: Finish = { ...attemptFinish, startedAt: held.startedAtWall };
    if ((await this.storeFinish(held, finish)) === 'lost') this.lost(held);
    else {
      this.instruments?.handled(this.queue, finish.outcome);
      this.announce(held, finish, durationMs);
    }
  }

  /**
   * Stores a finish: in the handler's transaction, committed with its writes, when it returned; otherwise (no
   * transaction, or the handler threw or timed out) after rolling that back, as any finish.
   */
  private storeFinish(held: Held, finish: Finish): Promise<FinishResult> {
    const transaction = held.transaction;
    // Not async for the common case: no promise and no turn more per message.
    if (transaction === null) return this.finish(finish);
    return this.storeFinishIn(transaction, held, finish);
  }

  private async storeFinishIn(transaction: HandlerTransaction, held: Held, finish: Finish): Promise<FinishResult> {
    if (held.cause !== 'handler') {
      await transaction.rollback().catch(this.reportError);
      return this.finish(finish);
    }
    try {
      return await transaction.commit(this.queue, this.id, finish);
    } catch (error) {
      // Not committed (or not known to be): the lock ends, and another worker handles the message again.
      this.instruments?.storeError(this.queue, 'finish');
      this.reportError(error);
      return 'lost';
    }
  }

  /** @internal job.progress */
  reportProgress(held: Held, value: unknown): boolean {
    return this.reportWriter().progress(this.reportsOf(held), value);
  }

  /** @internal job.log */
  reportLine(held: Held, line: string): boolean {
    return this.reportWriter().log(this.reportsOf(held), line);
  }

  /** @internal job.children */
  readChildren(id: string): Promise<MessageStatus[]> {
    const { store } = this;
    if (store.flowChildren === undefined) {
      return Promise.reject(new TypeError(`job.children() is not available on the ${store.kind} store: no flows`));
    }
    return store.flowChildren(this.queue, id);
  }

  /** The writer of handlers' reports, made on the first one. */
  private reportWriter(): ReportWriter {
    if (this.writer !== null) return this.writer;
    const { store } = this;
    if (store.report === undefined) {
      throw new JobReportError(`job.progress and job.log are not available on the ${store.kind} store`);
    }
    this.writer = new ReportWriter(
      store.report.bind(store),
      this.queue,
      this.id,
      (reports) => {
        const held = this.held.get(reports.id);
        if (held?.reports === reports && !held.finishing) this.lost(held);
      },
      this.reportError,
    );
    return this.writer;
  }

  /** A held message's reports; none once the handler has returned (its reports are settled) or it was lost. */
  private reportsOf(held: Held): MessageReports {
    if (held.reports === null) {
      held.reports = new MessageReports(held.id, held.attempt);
      if (held.takenAway || held.finishing) held.reports.discard();
    }
    return held.reports;
  }

  /** Outcome events, each built only when someone listens: most workers have no listeners. */
  private announce(held: Held, finish: Finish, durationMs: number): void {
    const { queue } = this;
    const { id, attempt, cause: reason } = held;
    const { error, backoffMs } = finish;
    if (finish.outcome === 'success') {
      if (this.listenerCount('completed') > 0) {
        const { result } = finish;
        const event = { queue, id, attempt, durationMs };
        this.tell(
          'completed',
          result === undefined ? event : { ...event, result: decodePayload(result.bytes, result.encoding) },
        );
      }
    } else if (finish.outcome === 'retry') {
      if (this.listenerCount('retrying') > 0) {
        this.tell('retrying', { queue, id, attempt, durationMs, error, reason, backoffMs });
      }
    } else if (this.listenerCount('failed') > 0) {
      this.tell('failed', { queue, id, attempt, durationMs, error, reason });
    }
  }

  /** The message's lock is gone (the store says so, or it ended unrenewed): stop its handler and say so, once. */
  private lost(held: Held, reason: Error = new Error('lock lost')): void {
    if (held.takenAway) return;
    takeAway(held, reason);
    this.instruments?.handled(this.queue, 'lost');
    if (this.listenerCount('stalled') > 0) {
      this.tell('stalled', { queue: this.queue, id: held.id, attempt: held.attempt });
    }
  }

  /**
   * A message given up before its handler started: reported lost, and handed back (its attempt counted) so that
   * a store which would keep an ended lock with its holder for a while (etcd's dispatcher) hands it on now. The
   * store refuses the give-back if it gave the message to another meanwhile; during a partition it waits with
   * the other finishes.
   */
  private unstarted(held: Held, reason: Error): void {
    this.lost(held, reason);
    // stop() waits for it as for a monitor's store calls.
    const handing: Promise<void> = this.finish(giveBackOf(held))
      .then(() => undefined, this.reportError)
      .finally(() => this.monitoring.delete(handing));
    this.monitoring.add(handing);
  }

  /**
   * The store says a held message was canceled (null: one may have been, and a renewal now finds which). It is
   * failed already: its handler is told to stop, and what it returns is not stored.
   */
  private readonly canceled = (canceled: CanceledMessage | null): void => {
    if (canceled === null) {
      if (this.held.size > 0) this.renewNow();
      return;
    }
    const held = this.held.get(canceled.id);
    if (held === undefined) {
      this.recentCancels.set(canceled.id, canceled.attempt);
      if (this.recentCancels.size > RECENT_CANCELS)
        this.recentCancels.delete(this.recentCancels.keys().next().value as string);
      return;
    }
    if (held.attempt !== canceled.attempt || held.takenAway) return;
    takeAway(held, new CanceledError(this.queue, held.id));
    this.instruments?.handled(this.queue, 'error');
    if (this.listenerCount('failed') > 0) {
      const durationMs = held.startedAt === 0 ? 0 : performance.now() - held.startedAt;
      const { queue } = this;
      this.tell('failed', {
        queue,
        id: held.id,
        attempt: held.attempt,
        durationMs,
        error: 'canceled',
        reason: 'canceled',
      });
    }
  };

  /** A held message a renewal found gone after a cancel hint: canceled if its status says so, else lost. */
  private async lostOrCanceled(held: Held): Promise<void> {
    const status = await this.store.status(this.queue, held.id).catch(() => null);
    if (status?.state === 'failed' && status.lastError?.startsWith('canceled') === true) {
      this.canceled({ id: held.id, attempt: held.attempt });
    } else {
      this.instruments?.lockLost(this.queue);
      this.lost(held);
    }
  }

  /** Renews now, or once more after the renewal under way, which may have left before what asks for this. */
  private renewNow(): void {
    if (this.state !== 'running') return;
    if (this.renewing !== null) {
      this.renewAgain = true;
      return;
    }
    this.renewing = this.renew(true).finally(() => {
      this.renewing = null;
      if (!this.renewAgain) return;
      this.renewAgain = false;
      this.renewNow();
    });
  }

  /** A message claimed while this worker still runs an earlier attempt of it: not held, reported as stalled. */
  private refuse(message: ClaimedMessage): void {
    this.instruments?.handled(this.queue, 'lost');
    if (this.listenerCount('stalled') > 0) {
      this.tell('stalled', { queue: this.queue, id: message.id, attempt: message.attempt });
    }
  }

  /** Emits an event; a listener that throws is a recovered error, not the worker's. */
  private tell<K extends Exclude<keyof WorkerEvents, 'error'>>(name: K, ...args: WorkerEvents[K]): void {
    try {
      // emit's typing cannot follow a generic event name; `args` are WorkerEvents[K] by this method's signature.
      (this as EventEmitter).emit(name, ...args);
    } catch (error) {
      this.reportError(error);
    }
  }

  /** A recovered error goes to `onError` and `error` listeners, or to stderr when there are neither. */
  private readonly reportError = (error: unknown): void => {
    const { onError } = this.options;
    const listened = this.listenerCount('error') > 0;
    if (onError !== null) onError(error);
    if (listened) {
      try {
        this.emit('error', error);
      } catch (thrown) {
        (onError ?? printError)(thrown);
      }
    }
    if (onError === null && !listened) printError(error);
  };

  /** A listener's promise rejected (with `captureRejections`). */
  override [EventEmitter.captureRejectionSymbol](error: Error, ...[event]: unknown[]): void {
    // An `error` listener that rejects must not be fed its own error again.
    if (event === 'error') (this.options.onError ?? printError)(error);
    else this.reportError(error);
  }

  /**
   * Queues a finish; the finishes of one tick go to the store together. A group-commit store gathers them
   * itself: each goes at once and resumes its handling as soon as it is stored (after an error, the queue).
   */
  private finish(finish: Finish): Promise<FinishResult> {
    if (this.store.capabilities.groupCommit === true && this.storeFailures === 0 && this.finishes.length === 0) {
      const instruments = this.instruments;
      const finishStart = instruments === null ? 0 : performance.now();
      this.sendingAlone += 1;
      return this.store.finish(this.queue, this.id, [finish]).then(
        ([result]) => {
          this.sendingAlone -= 1;
          instruments?.finished(this.queue, (performance.now() - finishStart) / 1000);
          return result ?? 'lost';
        },
        () => {
          this.sendingAlone -= 1;
          this.instruments?.storeError(this.queue, 'finish');
          return this.queueFinish(finish);
        },
      );
    }
    return this.queueFinish(finish);
  }

  private queueFinish(finish: Finish): Promise<FinishResult> {
    // A stop that gave up on the store takes no more.
    if (this.storeGivenUp) return Promise.reject(this.leftToLocks);
    return new Promise((resolve, reject) => {
      this.finishes.push({ finish, resolve, reject });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => void this.flush());
      }
    });
  }

  private async flush(): Promise<void> {
    while (this.finishes.length > 0 && !this.storeGivenUp) {
      const batch = this.finishes;
      this.finishes = [];
      this.sending = batch;
      // Their slots are free: a claim loop waiting for one asks for more now, in the same tick as this finish.
      if (this.full && this.claimWithFinishes) this.kick();
      const instruments = this.instruments;
      const finishStart = instruments === null ? 0 : performance.now();
      try {
        const results = await this.store.finish(
          this.queue,
          this.id,
          batch.map((p) => p.finish),
        );
        this.sending = [];
        this.storeAnswered();
        instruments?.finished(this.queue, (performance.now() - finishStart) / 1000);
        batch.forEach((p, i) => p.resolve(results[i] ?? 'lost'));
      } catch (error) {
        this.sending = [];
        // Keep the results (their locks are renewed meanwhile) until the store takes them, or a stop gives up.
        if (this.gaveUp()) {
          for (const pending of batch) pending.reject(this.leftToLocks);
          break;
        }
        this.finishes = batch.concat(this.finishes);
        this.instruments?.storeError(this.queue, 'finish');
        // A stop cuts a long backoff short: it has only stopGraceMs to store them.
        await this.storeFailed(error, this.halt.signal.aborted ? this.giveUp.signal : this.halt.signal);
      }
    }
    this.flushScheduled = false;
  }

  /** `afterCancel`: a store said a message may have been canceled; those found gone are looked up to tell which. */
  private async renew(afterCancel = false): Promise<void> {
    try {
      // A message given up is not renewed: its lock ends, and the store hands it to another worker.
      const held = [...this.held.values()].filter((h) => !h.takenAway);
      if (held.length > 0) {
        // Before the request leaves: the locks it extends end no sooner than lockMs after this.
        const sentAt = performance.now();
        const { lockMs } = this.options;
        const lost = await this.store.extend(this.queue, this.id, held, lockMs);
        this.instruments?.renewed(this.queue, held.length - lost.length);
        // Every lock moves; those reported lost are taken away below, so their fence no longer matters.
        const fenceAt = sentAt + lockMs - this.fenceMarginMs;
        for (const h of held) if (fenceAt > h.fenceAt) h.fenceAt = fenceAt;
        for (const id of lost) {
          const held = this.held.get(id);
          // A finishing message may be gone because its finish was just stored: the finish's own result says.
          if (held === undefined || held.finishing) continue;
          if (afterCancel) this.awaitMonitor(this.lostOrCanceled(held));
          else {
            this.instruments?.lockLost(this.queue);
            this.lost(held);
          }
        }
      }
      await this.register();
    } catch (error) {
      this.instruments?.storeError(this.queue, 'renew');
      this.reportError(error);
    }
  }

  /** When the store's session that holds the claims may end, less the margin; Infinity for a store without. */
  private sessionFence(): number {
    return this.store.claimsHeldUntil === undefined ? Infinity : this.store.claimsHeldUntil() - this.fenceMarginMs;
  }

  /** Arms the fence timer for `at` (a performance.now()), unless it fires sooner already. */
  private armFence(at: number): void {
    if (this.fenceTimer !== null) clearTimeout(this.fenceTimer);
    this.fenceTimerAt = at;
    this.fenceTimer = setTimeout(this.fence, Math.max(0, at - performance.now()));
  }

  private disarmFence(): void {
    if (this.fenceTimer !== null) clearTimeout(this.fenceTimer);
    this.fenceTimer = null;
    this.fenceTimerAt = Infinity;
  }

  /**
   * The fence timer: every held message whose lock may end now, without a renewal acknowledged since, is given
   * up (its signal aborted, its late result not stored), as is every one when the store's session may have
   * ended. One timer for the worker, armed for the earliest fence: renewals move fences later without touching
   * it, and it looks again when it fires.
   */
  private readonly fence = (): void => {
    this.fenceTimer = null;
    this.fenceTimerAt = Infinity;
    const now = performance.now();
    const sessionFence = this.sessionFence();
    let next = Infinity;
    for (const held of this.held.values()) {
      // A finishing message's result is on its way: the store's answer says whether it held.
      if (held.takenAway || held.finishing) continue;
      const at = Math.min(held.fenceAt, sessionFence);
      if (at > now) next = Math.min(next, at);
      else {
        this.instruments?.lockLost(this.queue);
        const reason = at === held.fenceAt ? unrenewedError(held) : sessionEndedError();
        // A handler that runs is told to stop; its message is left to its lock's end, which is what the margin
        // before that end is for. One not started yet goes back at once.
        if (held.startedAt === 0) this.unstarted(held, reason);
        else this.lost(held, reason);
      }
    }
    if (next < Infinity) this.armFence(next);
  };

  private async register(): Promise<void> {
    await this.store.registerConsumer(this.queue, {
      id: this.id,
      host: hostname(),
      pid: process.pid,
      ttlMs: this.options.lockMs,
    });
  }

  /** GC at the queue's stored interval (the store skips it when another process just ran it). */
  private async maintain(): Promise<void> {
    while (this.state === 'running') {
      try {
        await this.store.gc(this.queue, false);
        const config = await this.refreshConfig();
        await sleep(config.gcIntervalMs, this.halt.signal);
      } catch (error) {
        this.instruments?.storeError(this.queue, 'maintenance');
        this.reportError(error);
        await sleep(5000, this.halt.signal);
      }
    }
  }

  private async refreshConfig(): Promise<QueueConfig> {
    const config = await this.store.config(this.queue);
    this.accepts = this.options.respectFilters ? classMatcher(this.queue, this.options.filters, config) : null;
    return config;
  }

  private report(queueSize: number, dryRuns: number, claimed: readonly ClaimedMessage[]): void {
    const { monitor, logger } = this.options;
    if (monitor === null) return;
    try {
      const { queue, takeTurn } = this;
      const inFlight = this.held.size;
      const result = monitor({
        queue,
        queueSize,
        dryRuns,
        claimed: claimed.map((m) => m.id),
        inFlight,
        logger,
        takeTurn,
      });
      if (isPromiseLike(result)) this.awaitMonitor(result);
    } catch (error) {
      this.reportError(error);
    }
  }

  private awaitMonitor(running: PromiseLike<unknown>): void {
    this.monitoring.add(running);
    void Promise.resolve(running)
      .catch(this.reportError)
      .finally(() => this.monitoring.delete(running));
  }

  /** MonitorInfo.takeTurn: a turn on this worker's queue. */
  private readonly takeTurn = (name: string, everyMs: number): Promise<boolean> =>
    this.store.takeTurn(this.queue, checkTurnName(name), checkMs('everyMs', everyMs, 1));

  private async storeFailed(error: unknown, signal: AbortSignal): Promise<void> {
    this.storeFailures += 1;
    this.lastStoreError = error;
    this.reportError(error);
    const max = this.halt.signal.aborted ? MAX_STOPPING_BACKOFF_MS : MAX_ERROR_BACKOFF_MS;
    await sleep(expBackoff(this.storeFailures, { factor: 100, max }), signal, this.storeBack.signal);
  }

  /**
   * A store call got through. After failures, the other loops (claims, finishes, renewals share one count, so
   * each failure lengthens every loop's backoff) stop waiting: the store is back, and they try again now.
   */
  private storeAnswered(): void {
    if (this.storeFailures === 0) return;
    this.storeFailures = 0;
    this.storeBack.abort();
    this.storeBack = new AbortController();
  }

  /** Wakes the poll loop: a wake-up from the store, a free slot, or a stop. */
  private kick(): void {
    this.woken = true;
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }

  /** The poll loop's wait: up to `ms`, or until a kick (including one that came during the last claim). */
  private idle(ms: number): Promise<void> {
    if (this.state !== 'running' || this.woken || ms <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = Number.isFinite(ms) ? setLongTimeout(done, ms) : null;
      this.wake = done;
      function done(): void {
        timer?.clear();
        resolve();
      }
    });
  }
}

/** A message handed back unrun: queued again at once, no history recorded (its attempt stays counted). */
function giveBackOf(held: Held): Finish {
  return { id: held.id, attempt: held.attempt, outcome: 'retry', backoffMs: 0, error: null, startedAt: null };
}

function unrenewedError(held: Held): Error {
  return new Error(`lock lost: the lock of ${held.id} (attempt ${held.attempt}) ended without an acknowledged renewal`);
}

function staleLockError(held: Held): Error {
  return new Error(`lock lost: the lock of ${held.id} (attempt ${held.attempt}) had ended when it arrived`);
}

function sessionEndedError(): Error {
  return new Error('lock lost: the store session holding the lock may have ended');
}

function printError(error: unknown): void {
  console.error('kvmq worker:', error);
}

function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null)?.then === 'function';
}

/** The work's answer, or 'timeout' if `ms` pass first (the work's late answer is dropped). */
async function within<T>(work: Promise<T>, ms: number): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), ms)));
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
}
