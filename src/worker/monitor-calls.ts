/**
 * The worker's `monitor`, called on every claim, and the store calls a worker makes besides claims and results
 * (a monitor's takeTurn, a message handed back unrun): their failures are reported, and a stop waits for them.
 */
import { checkMs, checkTurnName } from '../model/validate.js';
import type { ClaimedMessage, Store } from '../stores/contract/contract.js';
import type { Logger, Monitor } from './options.js';
import type { WorkerView } from './view.js';

export class MonitorCalls {
  /** Store calls under way besides claims and results; a stop waits for them. */
  private readonly running = new Set<PromiseLike<unknown>>();

  constructor(
    private readonly worker: WorkerView,
    private readonly store: Store,
    private readonly monitor: Monitor | null,
    private readonly logger: Logger,
    private readonly reportError: (error: unknown) => void,
  ) {}

  /** Tells the monitor, if any, of a claim's answer. */
  report(queueSize: number, dryRuns: number, claimed: readonly ClaimedMessage[], inFlight: number): void {
    const { monitor, logger } = this;
    if (monitor === null) return;
    try {
      const { queue } = this.worker;
      const { takeTurn } = this;
      const result = monitor({
        queue,
        queueSize,
        dryRuns,
        claimed: claimed.map((m) => m.id),
        inFlight,
        logger,
        takeTurn,
      });
      if (isPromiseLike(result)) this.track(result);
    } catch (error) {
      this.reportError(error);
    }
  }

  /** Store work under way: its failure is reported, and the stop waits for it. */
  track(work: PromiseLike<unknown>): void {
    this.running.add(work);
    void Promise.resolve(work)
      .catch(this.reportError)
      .finally(() => this.running.delete(work));
  }

  /** Settles once every call under way now has. */
  settled(): Promise<unknown> {
    return Promise.allSettled(this.running);
  }

  /** MonitorInfo.takeTurn: a turn on this worker's queue. */
  private readonly takeTurn = (name: string, everyMs: number): Promise<boolean> =>
    this.store.takeTurn(this.worker.queue, checkTurnName(name), checkMs('everyMs', everyMs, 1));
}

function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null)?.then === 'function';
}
