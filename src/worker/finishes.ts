/**
 * A worker's finishes on their way to the store: those of one tick go together, and a failed batch is kept (its
 * locks renewed meanwhile) and sent again until the store takes it or a stop gives up on the store. A
 * group-commit store gathers finishes itself: each goes at once.
 */
import type { Finish, FinishResult, HandlerTransaction, Store } from '../stores/contract/contract.js';
import { StoreUnavailableError } from '../model/errors.js';
import type { Held } from './held.js';
import type { StoreHealth } from './store-health.js';
import type { StopSignals } from './stop-signals.js';
import type { WorkerView } from './view.js';

interface PendingFinish {
  readonly finish: Finish;
  readonly resolve: (result: FinishResult) => void;
  /** Called only with the stop's give-up reason: the store never took this finish. */
  readonly reject: (reason: unknown) => void;
}

export class FinishQueue {
  /** Finishes waiting for the next flush, or for the store to come back. */
  private pending: PendingFinish[] = [];
  /** The batch of finishes the store is working on. */
  private sending: readonly PendingFinish[] = [];
  /** Single finishes the store is working on (group-commit stores). */
  private sendingAlone = 0;
  private flushScheduled = false;
  private readonly groupCommit: boolean;

  constructor(
    private readonly worker: WorkerView,
    private readonly store: Store,
    private readonly health: StoreHealth,
    private readonly stops: StopSignals,
    private readonly reportError: (error: unknown) => void,
    /** A batch leaves: the slots of its messages are free. */
    private readonly leaving: () => void,
  ) {
    this.groupCommit = store.capabilities.groupCommit === true;
  }

  /**
   * Stores a finish: in the handler's transaction, committed with its writes, when it returned; otherwise (no
   * transaction, or the handler threw or timed out) after rolling that back, as any finish.
   */
  storeFinish(held: Held, finish: Finish): Promise<FinishResult> {
    const transaction = held.transaction;
    // Not async for the common case: no promise and no turn more per message.
    if (transaction === null) return this.finish(finish);
    return this.storeIn(transaction, held, finish);
  }

  /**
   * Queues a finish; the finishes of one tick go to the store together. A group-commit store gathers them
   * itself: each goes at once and resumes its handling as soon as it is stored (after an error, the queue).
   */
  finish(finish: Finish): Promise<FinishResult> {
    if (this.groupCommit && this.health.failures === 0 && this.pending.length === 0) {
      const { worker } = this;
      const instruments = worker.instruments;
      const finishStart = instruments === null ? 0 : performance.now();
      this.sendingAlone += 1;
      return this.store.finish(worker.queue, worker.id, [finish]).then(
        ([result]) => {
          this.sendingAlone -= 1;
          instruments?.finished(worker.queue, (performance.now() - finishStart) / 1000);
          return result ?? 'lost';
        },
        () => {
          this.sendingAlone -= 1;
          worker.instruments?.storeError(worker.queue, 'finish');
          return this.enqueue(finish);
        },
      );
    }
    return this.enqueue(finish);
  }

  /**
   * After the stop gave up on the store: the finishes it never took are dropped, their messages left to their locks
   * (another worker handles them once the locks end), and one error says how many.
   */
  leaveToLocks(): void {
    const { stops, worker } = this;
    if (!stops.giveUp.signal.aborted) return;
    const left = this.pending.length + this.sending.length + this.sendingAlone;
    const dropped = this.pending;
    this.pending = [];
    for (const pending of dropped) pending.reject(stops.leftToLocks);
    if (left === 0) return;
    this.reportError(
      new StoreUnavailableError(
        `worker ${worker.id} stopped without storing the outcome of ${left} message(s) of queue '${worker.queue}': ` +
          `the store did not take them within stopGraceMs (${stops.graceMs} ms); unless it still ` +
          'takes the calls already sent, they stay locked until their locks end, then another worker handles them',
        this.health.lastError ?? undefined,
      ),
    );
  }

  private async storeIn(transaction: HandlerTransaction, held: Held, finish: Finish): Promise<FinishResult> {
    if (held.cause !== 'handler') {
      await transaction.rollback().catch(this.reportError);
      return this.finish(finish);
    }
    const { worker } = this;
    try {
      return await transaction.commit(worker.queue, worker.id, finish);
    } catch (error) {
      // Not committed (or not known to be): the lock ends, and another worker handles the message again.
      worker.instruments?.storeError(worker.queue, 'finish');
      this.reportError(error);
      return 'lost';
    }
  }

  private enqueue(finish: Finish): Promise<FinishResult> {
    // A stop that gave up on the store takes no more.
    if (this.stops.givenUp) return Promise.reject(this.stops.leftToLocks);
    return new Promise((resolve, reject) => {
      this.pending.push({ finish, resolve, reject });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => void this.flush());
      }
    });
  }

  private async flush(): Promise<void> {
    const { worker, stops } = this;
    while (this.pending.length > 0 && !stops.givenUp) {
      const batch = this.pending;
      this.pending = [];
      this.sending = batch;
      // Their slots are free: a claim loop waiting for one asks for more now, in the same tick as this finish.
      this.leaving();
      const instruments = worker.instruments;
      const finishStart = instruments === null ? 0 : performance.now();
      try {
        const results = await this.store.finish(
          worker.queue,
          worker.id,
          batch.map((p) => p.finish),
        );
        this.sending = [];
        this.health.answered();
        instruments?.finished(worker.queue, (performance.now() - finishStart) / 1000);
        batch.forEach((p, i) => p.resolve(results[i] ?? 'lost'));
      } catch (error) {
        this.sending = [];
        // Keep the results (their locks are renewed meanwhile) until the store takes them, or a stop gives up.
        if (stops.gaveUp()) {
          for (const pending of batch) pending.reject(stops.leftToLocks);
          break;
        }
        this.pending = batch.concat(this.pending);
        worker.instruments?.storeError(worker.queue, 'finish');
        // A stop cuts a long backoff short: it has only stopGraceMs to store them.
        await this.health.failed(error, stops.halt.signal.aborted ? stops.giveUp.signal : stops.halt.signal);
      }
    }
    this.flushScheduled = false;
  }
}
