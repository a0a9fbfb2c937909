/**
 * The messages a worker holds, from claim to stored outcome: claimed ahead and waiting for a slot, started (one
 * per handler call, or a batch), their finish stored, and the events and metrics of what became of each.
 */
import { decodePayload } from '../model/payload.js';
import { decodePolicy } from '../model/policy.js';
import type { BatchHandler, Handler, Job } from '../model/types.js';
import type { AttemptFinish, ClaimedMessage, Finish, Store } from '../stores/contract/contract.js';
import { UNTRACED, traceProcess } from '../tracing/process.js';
import type { Announcer } from './announcer.js';
import { Attempts, pastTimeToLive } from './attempts.js';
import type { CheckedBatchOptions } from './batch.js';
import type { FinishQueue } from './finishes.js';
import { HeldJob, takeAway, type Held } from './held.js';
import type { JobReports } from './job-reports.js';
import type { LockKeeper } from './locks.js';
import type { MonitorCalls } from './monitor-calls.js';
import type { CheckedWorkerOptions } from './options.js';
import type { StopSignals } from './stop-signals.js';
import type { WorkerView } from './view.js';

interface Waiting {
  readonly held: Held;
  readonly message: ClaimedMessage;
}

/** The parts of the worker a handling works with. */
export interface HandlingParts {
  readonly store: Store;
  readonly handler: Handler | BatchHandler;
  readonly options: CheckedWorkerOptions;
  readonly locks: LockKeeper;
  readonly finishes: FinishQueue;
  readonly announcer: Announcer;
  readonly reports: JobReports;
  readonly monitor: MonitorCalls;
  readonly stops: StopSignals;
  /** A message's handling has ended: its slot is free. */
  readonly slotFreed: () => void;
}

export class Handling {
  /** Handler calls running now (at most `concurrency`; with `batch`, each call runs a batch). */
  running = 0;
  /** Held messages whose handler returned: their results travel to the store while the next claim does. */
  done = 0;
  /** Claimed ahead, not yet started, oldest first. */
  private waiting: Waiting[] = [];
  /** Each handling under way, until its result is stored; a stop waits for them. */
  private readonly handlers = new Map<Held, Promise<void>>();
  /** With `batch`: the wait for a fuller batch, while one is armed. */
  private batchTimer: NodeJS.Timeout | null = null;
  /** The wait for a fuller batch ran out: the next free handler takes what is ready. */
  private batchWaitOver = false;
  private readonly attempts: Attempts;
  private readonly options: CheckedWorkerOptions;

  constructor(
    private readonly worker: WorkerView,
    /** Every message this worker holds: waiting for a slot, in a handler, or finishing. */
    readonly held: Map<string, Held>,
    private readonly parts: HandlingParts,
  ) {
    this.options = parts.options;
    this.attempts = new Attempts(worker, parts.store, parts.handler, parts.options, (messages) =>
      this.handlerReturned(messages),
    );
  }

  /** Messages claimed ahead and not started yet. */
  get waitingCount(): number {
    return this.waiting.length;
  }

  /** Holds a claimed message; `since`: when the request that locked it was sent (see ClaimedMessage.lockLeftMs). */
  accept(message: ClaimedMessage, since: number): void {
    const { locks } = this.parts;
    if (locks.wasCanceled(message)) return;
    const prior = this.held.get(message.id);
    if (prior !== undefined) {
      // The attempt held here, delivered again (a store that lists its deliveries anew after a reconnect, while
      // this attempt's finish waits for it): the one held settles it, and it is not run twice.
      if (prior.attempt === message.attempt) return;
      // An earlier attempt's handler still runs here (its lock ended, or this answer proves it did): the new
      // attempt is not started beside it, and its lock is left to end (the prior handler was told to stop).
      if (prior.startedAt > 0 && !prior.finishing) {
        this.parts.announcer.lost(prior);
        this.parts.announcer.stalled(message.id, message.attempt);
        return;
      }
    }
    const fenceAt = locks.fenceOf(since, message);
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
    locks.watch(fenceAt);
  }

  /**
   * Starts waiting messages while slots are free. One whose lock was lost meanwhile is dropped; one whose lock
   * ends (nearly) now is not started: it is reported lost and handed back (see unstarted).
   */
  startWaiting(): void {
    const { batch } = this.options;
    if (batch !== null) {
      this.startBatches(batch);
      return;
    }
    while (this.worker.running && this.running < this.options.concurrency && this.waiting.length > 0) {
      const now = performance.now();
      const next = this.nextStartable(now);
      if (next !== null) this.handle(next.held, next.message, now);
    }
  }

  /**
   * A message given up before its handler started: reported lost, and handed back (its attempt counted) so that
   * a store which would keep an ended lock with its holder for a while (etcd's dispatcher) hands it on now. The
   * store refuses the give-back if it gave the message to another meanwhile; during a partition it waits with
   * the other finishes.
   */
  unstarted(held: Held, reason: Error): void {
    this.parts.announcer.lost(held, reason);
    // A stop waits for it as for a monitor's store calls.
    this.parts.monitor.track(this.parts.finishes.finish(giveBackOf(held)));
  }

  /** Prefetched messages no handler started go back to the queue (their next claim is a new attempt). */
  async giveBackWaiting(): Promise<void> {
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
    const { finishes, stops } = this.parts;
    await stops.storeWait(Promise.all(released.map((finish) => finishes.finish(finish))));
    for (const finish of released) this.held.delete(finish.id);
  }

  /** A forced stop: every message not finishing is taken from its handler and released; null when none. */
  releaseAll(): Promise<unknown> | null {
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
    if (released.length === 0) return null;
    // Their only failure is the stop giving up, which its own error counts.
    const { finishes } = this.parts;
    return Promise.all(released.map((finish) => finishes.finish(finish))).catch(() => undefined);
  }

  /** Settles once every handling under way now has stored its result (or failed to). */
  settled(): Promise<unknown> {
    return Promise.allSettled(this.handlers.values());
  }

  /** Handlings whose result is on its way to the store (the others were taken away by a forced stop). */
  finishing(): Promise<void>[] {
    return [...this.handlers].filter(([held]) => held.finishing && !held.takenAway).map(([, handling]) => handling);
  }

  stopBatchTimer(): void {
    if (this.batchTimer !== null) clearTimeout(this.batchTimer);
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
    while (this.worker.running && this.running < this.options.concurrency && this.waiting.length > 0) {
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
    this.running += 1;
    const job = this.jobOf(held, message, now);
    this.handlers.set(held, this.process(held, this.attempts.one(held, job)));
  }

  /** One handler call for the batch; each message's outcome is then stored on its own, as a single message's. */
  private handleBatch(waiting: readonly Waiting[], now: number): void {
    // One past its time to live fails alone, as handle() fails it, and never reaches the batch's handler.
    const wallNow = Date.now();
    const batch: Waiting[] = [];
    for (const w of waiting) {
      if (pastTimeToLive(w.held, wallNow)) this.handle(w.held, w.message, now);
      else batch.push(w);
    }
    if (batch.length === 0) return;
    this.running += 1;
    const helds = batch.map((w) => w.held);
    const jobs = batch.map(({ held, message }) => this.jobOf(held, message, now));
    const finishes = this.attempts.batch(helds, jobs);
    helds.forEach((held, i) => {
      const attempted = finishes.then((all) => all[i] as AttemptFinish);
      this.handlers.set(held, this.process(held, attempted));
    });
  }

  /** Marks the message's handling started and makes its job. */
  private jobOf(held: Held, message: ClaimedMessage, now: number): Job {
    held.startedAt = now;
    held.startedAtWall = Date.now();
    const { queue, id } = this.worker;
    held.trace = traceProcess(queue, id, message);
    const payload = decodePayload(message.payload, message.encoding);
    const { reports } = this.parts;
    return new HeldJob(queue, message.id, payload, message.metadata, message.filters, message.attempt, held, reports);
  }

  /**
   * A handler call returned (or timed out). Its slots are free: a prefetched message starts while its results
   * travel, and the next claim goes out with the batch of finishes (flush).
   */
  private handlerReturned(messages: number): void {
    this.running -= 1;
    this.done += messages;
    // The last handler of a stop has returned: the store gets stopGraceMs more to take the results.
    if (this.running === 0 && this.parts.stops.halt.signal.aborted) this.parts.stops.startGraceTimer();
    this.startWaiting();
  }

  /** One message's handling once its attempt is under way: its finish stored, then everything it held let go. */
  private async process(held: Held, attempted: Promise<AttemptFinish>): Promise<void> {
    const { announcer } = this.parts;
    try {
      await this.record(held, held.trace.outcome(await attempted, held.cause));
    } catch (error) {
      // Dropped by a stop that gave up on the store: counted in its one error.
      if (error !== this.parts.stops.leftToLocks) announcer.reportError(error);
    } finally {
      // Taken away, thrown, or its commit failed: whatever the handler wrote is undone.
      held.transaction?.rollback().catch(announcer.reportError);
      held.trace.end(held);
      if (this.held.get(held.id) === held) this.held.delete(held.id);
      this.done -= 1;
      this.handlers.delete(held);
      this.parts.slotFreed();
    }
  }

  /** Stores the attempt's finish, then tells listeners what the store kept. */
  private async record(held: Held, attemptFinish: AttemptFinish): Promise<void> {
    const durationMs = performance.now() - held.startedAt;
    this.worker.instruments?.handlerEnded(this.worker.queue, durationMs / 1000);
    // A lost lock or a forced stop: the message is someone else's now.
    if (held.takenAway) return;
    held.finishing = true;
    // What the handler reported goes first: the finish is its last write, and nothing comes after it.
    if (held.reports !== null) await this.parts.reports.settle(held.reports);
    const finish: Finish = { ...attemptFinish, startedAt: held.startedAtWall };
    if ((await this.parts.finishes.storeFinish(held, finish)) === 'lost') this.parts.announcer.lost(held);
    else this.parts.announcer.handled(held, finish, durationMs);
  }
}

/** A message handed back unrun: queued again at once, no history recorded (its attempt stays counted). */
function giveBackOf(held: Held): Finish {
  return { id: held.id, attempt: held.attempt, outcome: 'retry', backoffMs: 0, error: null, startedAt: null };
}

function staleLockError(held: Held): Error {
  return new Error(`lock lost: the lock of ${held.id} (attempt ${held.attempt}) had ended when it arrived`);
}
