/**
 * A worker: claim → handler → finish, with lock renewal while handlers run,
 * messages claimed ahead (prefetch), batched finishes, queue-wide end-of-queue backoff, wake-ups from the store,
 * handler timeouts, outcome events, the consumer registry, GC, the queue's schedules, and a graceful (then
 * forceful) stop. This class starts and stops the parts that do each: claim-loop.ts, handling.ts (with
 * attempts.ts), finishes.ts, locks.ts, announcer.ts.
 */
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import { classMatcher } from '../model/filters.js';
import { checkQueueName } from '../model/validate.js';
import { sleep } from '../model/time.js';
import { KvmqError } from '../model/errors.js';
import type { BatchHandler, Handler, QueueConfig } from '../model/types.js';
import type { SharedSchedulers } from '../schedule/shared.js';
import type { Store } from '../stores/contract/contract.js';
import { Announcer } from './announcer.js';
import { ClaimLoop } from './claim-loop.js';
import type { WorkerEvents } from './events.js';
import { FinishQueue } from './finishes.js';
import { Handling } from './handling.js';
import type { Held } from './held.js';
import type { WorkerInstruments } from '../metrics/instruments.js';
import { JobReports } from './job-reports.js';
import { LockKeeper } from './locks.js';
import { MonitorCalls } from './monitor-calls.js';
import { checkWorkerOptions, type AnyWorkerOptions, type CheckedWorkerOptions } from './options.js';
import { aborted, StopSignals } from './stop-signals.js';
import { StoreHealth } from './store-health.js';

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

/**
 * The only way to build a Worker (`client.worker()` calls it): the constructor is private, so its internal
 * parameters stay out of the API.
 */
export let makeWorker: (
  store: Store,
  queue: string,
  handler: Handler | BatchHandler,
  options: AnyWorkerOptions,
  onStopped: () => void,
  schedulers: SharedSchedulers,
) => Worker;

/** Listeners for `completed`, `failed`, `retrying`, `stalled` and `error`: see WorkerEvents. */
export class Worker extends EventEmitter<WorkerEvents> {
  /** This worker's consumer id, as the registry shows it. */
  readonly id = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  readonly queue: string;
  readonly autoStart: boolean;
  private readonly options: CheckedWorkerOptions;
  private readonly announcer: Announcer;
  private readonly stops: StopSignals;
  private readonly health: StoreHealth;
  private readonly monitor: MonitorCalls;
  private readonly finishes: FinishQueue;
  private readonly locks: LockKeeper;
  private readonly handling: Handling;
  private readonly claims: ClaimLoop;
  private state: WorkerState = 'idle';
  /** The forced stop's releases, until the store takes them. */
  private releasing: Promise<unknown> | null = null;
  /** The consumer is registered (a stop unregisters it). */
  private registered = false;
  private starting: Promise<void> | null = null;
  private loop: Promise<void> | null = null;
  private unsubscribe: (() => void) | null = null;
  private unsubscribeCancels: (() => void) | null = null;
  /** The GC and configuration loop; stop() waits for it so no store call outlives the worker. */
  private maintenance: Promise<void> | null = null;
  /** This worker's part in the client's scheduler of the queue (option `schedules`); stop() waits for it. */
  private scheduling: Promise<void> | null = null;
  private stopping: Promise<void> | null = null;
  /** @internal set by the client when its metrics are asked for; null costs the hot path nothing. */
  instruments: WorkerInstruments | null = null;

  static {
    makeWorker = (store, queue, handler, options, onStopped, schedulers) =>
      new Worker(store, queue, handler, options, onStopped, schedulers);
  }

  /** Use `client.worker()`. */
  private constructor(
    private readonly store: Store,
    queue: string,
    handler: Handler | BatchHandler,
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
    const checked = this.options;
    const announcer = (this.announcer = new Announcer(this, checked.onError));
    const { reportError } = announcer;
    this.stops = new StopSignals(checked.stopGraceMs, reportError);
    this.health = new StoreHealth(reportError, this.stops.halt.signal);
    const monitor = (this.monitor = new MonitorCalls(this, store, checked.monitor, checked.logger, reportError));
    this.finishes = new FinishQueue(this, store, this.health, this.stops, reportError, () =>
      this.claims.finishesLeaving(),
    );
    const held = new Map<string, Held>();
    this.locks = new LockKeeper(this, store, checked.lockMs, held, announcer, monitor, (message, reason) =>
      this.handling.unstarted(message, reason),
    );
    this.handling = new Handling(this, held, {
      store,
      handler,
      options: checked,
      locks: this.locks,
      finishes: this.finishes,
      announcer,
      reports: new JobReports(this, store, held, announcer),
      monitor,
      stops: this.stops,
      slotFreed: () => this.claims.slotFreed(),
    });
    this.claims = new ClaimLoop(
      this,
      store,
      checked,
      this.handling,
      this.health,
      monitor,
      reportError,
      this.stops.halt.signal,
    );
  }

  get running(): boolean {
    return this.state === 'running';
  }

  /** Messages this worker holds now. */
  get inFlight(): number {
    return this.handling.held.size;
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
        if (settled) this.announcer.reportError(error);
        else reject(error instanceof Error ? error : new Error(String(error)));
        settled = true;
      });
    });
  }

  /** @internal `client.worker()` with autoStart: nobody awaits start(), so a refusal goes where other errors go. */
  startInBackground(): void {
    this.start().catch(this.announcer.reportError);
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
    const { claims } = this;
    this.unsubscribe = this.store.subscribe(this.queue, () => claims.kick());
    this.unsubscribeCancels = this.store.subscribeCancels(this.queue, this.locks.canceled);
    claims.receiveHandoffs();
    this.locks.startRenewing();
    this.loop = claims.run();
    this.maintenance = this.maintain();
    if (this.options.schedules) {
      this.scheduling = this.schedulers.join(this.queue, this.announcer.reportError, this.stops.halt.signal);
    }
  }

  /**
   * Reads the queue's configuration and registers the consumer. A transient failure is reported and tried again
   * with backoff until it succeeds or a stop comes; any other failure is thrown.
   */
  private async join(trying: () => void): Promise<void> {
    const { halt } = this.stops;
    while (!halt.signal.aborted) {
      try {
        await this.refreshConfig();
        await this.locks.register();
        this.registered = true;
        this.health.answered();
        return;
      } catch (error) {
        if (!(error instanceof KvmqError && error.transient)) throw error;
        this.instruments?.storeError(this.queue, 'renew');
        trying();
        await this.health.failed(error, halt.signal);
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
    this.stops.halt.abort();
    this.claims.kick();
    if (this.handling.running === 0) this.stops.startGraceTimer();
    this.stopping = this.drain();
    return this.stopping;
  }

  private async drain(): Promise<void> {
    const { stops, handling } = this;
    await stops.storeWait(this.starting);
    if (this.state === 'stopped') return; // start failed and cleaned up
    await stops.storeWait(this.loop);
    // What was handed over and not started yet waits with the prefetched messages, and goes back with them.
    await stops.storeWait(this.claims.handoffs?.close());
    await handling.giveBackWaiting();
    // A handler settles only once its result reached the store, so this also waits for the finishes.
    await Promise.race([handling.settled(), aborted(stops.force.signal), stops.whenGivenUp()]);
    // Forced: the messages released, and the results already on their way, are still worth storing.
    if (stops.force.signal.aborted) await stops.storeWait(Promise.all([this.releasing, ...handling.finishing()]));
    const renewing = this.locks.stopRenewing();
    handling.stopBatchTimer();
    await stops.storeWait(renewing);
    this.locks.disarmFence();
    await stops.storeWait(this.maintenance);
    await stops.storeWait(this.scheduling);
    await stops.storeWait(this.monitor.settled());
    this.unsubscribe?.();
    this.unsubscribeCancels?.();
    if (this.registered) await stops.storeWait(this.store.unregisterConsumer(this.queue, this.id));
    stops.clearGraceTimer();
    this.finishes.leaveToLocks();
    this.state = 'stopped';
    this.onStopped();
  }

  private forceStop(): void {
    const { stops } = this;
    if (stops.force.signal.aborted) return;
    stops.force.abort();
    stops.startGraceTimer();
    this.releasing = this.handling.releaseAll();
  }

  /** A listener's promise rejected (with `captureRejections`). */
  override [EventEmitter.captureRejectionSymbol](error: Error, ...[event]: unknown[]): void {
    this.announcer.listenerRejected(error, event);
  }

  /** GC at the queue's stored interval (the store skips it when another process just ran it). */
  private async maintain(): Promise<void> {
    const { halt } = this.stops;
    while (this.state === 'running') {
      try {
        await this.store.gc(this.queue, false);
        const config = await this.refreshConfig();
        await sleep(config.gcIntervalMs, halt.signal);
      } catch (error) {
        this.instruments?.storeError(this.queue, 'maintenance');
        this.announcer.reportError(error);
        await sleep(5000, halt.signal);
      }
    }
  }

  private async refreshConfig(): Promise<QueueConfig> {
    const config = await this.store.config(this.queue);
    this.claims.accepts = this.options.respectFilters ? classMatcher(this.queue, this.options.filters, config) : null;
    return config;
  }
}
