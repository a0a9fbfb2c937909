/**
 * The worker metrics of one client: counters and histograms fed by its workers' instruments hook
 * (src/metrics/instruments.ts), and the in-flight gauge read from the workers at scrape time.
 * Made once per client, registered in every registry `client.metrics()` returns.
 */
import type { Counter, Gauge, Histogram, Metric } from 'prom-client';
import type { HandledOutcome, WorkerInstruments, WorkerStoreOperation } from './instruments.js';
import { HANDLER_BUCKETS, ROUND_TRIP_BUCKETS, type PromClient } from './prom.js';

/** What the in-flight gauge reads: each running worker's queue and the messages it holds. */
export type InFlightSource = () => Iterable<{ readonly queue: string; readonly inFlight: number }>;

const HANDLED_OUTCOMES: readonly HandledOutcome[] = ['success', 'retry', 'error', 'lost'];

/** A queue's per-message counts, kept as plain numbers on the hot path and handed to prom-client at scrape time. */
type QueueTally = Record<HandledOutcome | 'claimed', number>;

export class WorkerMetrics implements WorkerInstruments {
  private readonly handledTotal: Counter<'queue' | 'outcome'>;
  private readonly handlerSeconds: Histogram<'queue'>;
  private readonly claimSeconds: Histogram<'queue'>;
  private readonly claimedTotal: Counter<'queue'>;
  private readonly finishSeconds: Histogram<'queue'>;
  private readonly renewalsTotal: Counter<'queue'>;
  private readonly locksLostTotal: Counter<'queue'>;
  private readonly storeErrorsTotal: Counter<'queue' | 'operation'>;
  private readonly inFlight: Gauge<'queue'>;
  /** Per queue: a prom-client call costs a label check and hash; a number in a record does not. */
  private readonly tallies = new Map<string, QueueTally>();

  constructor(prom: PromClient, workers: InFlightSource) {
    // registers: [] keeps them out of prom-client's global registry: each client's metrics are its own.
    const registers: [] = [];
    const tallies = this.tallies;
    this.handledTotal = new prom.Counter({
      name: 'kvmq_messages_handled_total',
      help: 'Messages handled by this process, by the outcome the store kept (lost: the lock was gone first)',
      labelNames: ['queue', 'outcome'],
      registers,
      collect() {
        this.reset();
        for (const [queue, tally] of tallies) {
          for (const outcome of HANDLED_OUTCOMES) this.inc({ queue, outcome }, tally[outcome]);
        }
      },
    });
    this.handlerSeconds = new prom.Histogram({
      name: 'kvmq_handler_duration_seconds',
      help: 'Time from a handler start to its result (or its timeout)',
      labelNames: ['queue'],
      buckets: HANDLER_BUCKETS,
      registers,
    });
    this.claimSeconds = new prom.Histogram({
      name: 'kvmq_claim_duration_seconds',
      help: 'Store round trip of a claim, whether it brought messages or not',
      labelNames: ['queue'],
      buckets: ROUND_TRIP_BUCKETS,
      registers,
    });
    this.claimedTotal = new prom.Counter({
      name: 'kvmq_messages_claimed_total',
      help: 'Messages claimed by this process (each delivery counts)',
      labelNames: ['queue'],
      registers,
      collect() {
        this.reset();
        for (const [queue, tally] of tallies) this.inc({ queue }, tally.claimed);
      },
    });
    this.finishSeconds = new prom.Histogram({
      name: 'kvmq_finish_duration_seconds',
      help: "Store round trip of a batch of finishes (one tick's results travel together)",
      labelNames: ['queue'],
      buckets: ROUND_TRIP_BUCKETS,
      registers,
    });
    this.renewalsTotal = new prom.Counter({
      name: 'kvmq_lock_renewals_total',
      help: 'Locks extended while their handlers ran',
      labelNames: ['queue'],
      registers,
    });
    this.locksLostTotal = new prom.Counter({
      name: 'kvmq_locks_lost_total',
      help: 'Locks a renewal found gone (expired and taken, or cleared) while the handler still ran',
      labelNames: ['queue'],
      registers,
    });
    this.storeErrorsTotal = new prom.Counter({
      name: 'kvmq_store_errors_total',
      help: 'Failed store calls of workers, by operation (claim, finish, renew, maintenance)',
      labelNames: ['queue', 'operation'],
      registers,
    });
    this.inFlight = new prom.Gauge({
      name: 'kvmq_messages_in_flight',
      help: "Messages this process's workers hold now: claimed ahead, in a handler, or finishing",
      labelNames: ['queue'],
      registers,
      collect() {
        this.reset();
        const byQueue = new Map<string, number>();
        for (const worker of workers()) byQueue.set(worker.queue, (byQueue.get(worker.queue) ?? 0) + worker.inFlight);
        for (const [queue, count] of byQueue) this.set({ queue }, count);
      },
    });
  }

  /** Every metric, to register in a registry. */
  all(): Metric[] {
    return [
      this.handledTotal,
      this.handlerSeconds,
      this.claimSeconds,
      this.claimedTotal,
      this.finishSeconds,
      this.renewalsTotal,
      this.locksLostTotal,
      this.storeErrorsTotal,
      this.inFlight,
    ];
  }

  /** Starts the queue's series at zero, so a rate over them is defined before the first message. */
  startQueue(queue: string): void {
    this.tally(queue);
    this.renewalsTotal.inc({ queue }, 0);
    this.locksLostTotal.inc({ queue }, 0);
  }

  claimed(queue: string, seconds: number, count: number): void {
    this.claimSeconds.observe({ queue }, seconds);
    this.tally(queue).claimed += count;
  }

  handedOff(queue: string, count: number): void {
    this.tally(queue).claimed += count;
  }

  handlerEnded(queue: string, seconds: number): void {
    this.handlerSeconds.observe({ queue }, seconds);
  }

  finished(queue: string, seconds: number): void {
    this.finishSeconds.observe({ queue }, seconds);
  }

  handled(queue: string, outcome: HandledOutcome): void {
    this.tally(queue)[outcome] += 1;
  }

  renewed(queue: string, count: number): void {
    if (count > 0) this.renewalsTotal.inc({ queue }, count);
  }

  lockLost(queue: string): void {
    this.locksLostTotal.inc({ queue });
  }

  storeError(queue: string, operation: WorkerStoreOperation): void {
    this.storeErrorsTotal.inc({ queue, operation });
  }

  private tally(queue: string): QueueTally {
    let tally = this.tallies.get(queue);
    if (tally === undefined) {
      tally = { success: 0, retry: 0, error: 0, lost: 0, claimed: 0 };
      this.tallies.set(queue, tally);
    }
    return tally;
  }
}
