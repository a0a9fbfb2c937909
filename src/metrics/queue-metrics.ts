/**
 * Per-queue metrics, read from the store when scraped (no state is kept between scrapes): counts per state,
 * paused, live consumers, dry runs and the age of the message next in line. Every gauge of one scrape shares
 * one read of each queue.
 */
import type { Gauge, Metric } from 'prom-client';
import { MESSAGE_STATES } from '../model/types.js';
import type { Store } from '../stores/contract/contract.js';
import type { PromClient } from './prom.js';

/** One queue as a scrape saw it; null where the read failed. */
interface QueueReading {
  readonly queue: string;
  readonly status: Awaited<ReturnType<Store['queueStatus']>> | null;
  /** Seconds since the next message in line was enqueued; null when nothing waits (or the read failed). */
  readonly oldestAgeSeconds: number | null;
}

/** The `queue` label of a failed listing of every queue: no queue name can be it. */
const ALL_QUEUES = '*';

/** Queues read at once per scrape: enough to hide round trips, few enough not to flood the store. */
const READ_CONCURRENCY = 8;

/** Which queues a registry reports: these, or every queue of the store (`store.queues()`) when null. */
export type QueueSelection = readonly string[] | null;

export class QueueMetrics {
  private readonly gauges: Gauge[];
  private readonly readErrors;
  /** The read of the scrape under way: every gauge's collect() of one scrape starts in the same tick. */
  private reading: Promise<QueueReading[]> | null = null;

  constructor(
    prom: PromClient,
    private readonly store: Store,
    private readonly selection: QueueSelection,
  ) {
    const registers: [] = [];
    this.readErrors = new prom.Counter({
      name: 'kvmq_queue_read_errors_total',
      help: 'Scrapes that could not read a queue (its gauges are left out of that scrape)',
      labelNames: ['queue'],
      registers,
      // Read after this scrape's reads, so that it counts their failures.
      collect: async () => {
        await this.readAll();
      },
    });
    const gauge = (
      name: string,
      help: string,
      labelNames: string[],
      fill: (gauge: Gauge, reading: QueueReading) => void,
    ): Gauge => {
      const readAll = (): Promise<QueueReading[]> => this.readAll();
      return new prom.Gauge({
        name,
        help,
        labelNames,
        registers,
        async collect() {
          const readings = await readAll();
          this.reset();
          for (const reading of readings) fill(this, reading);
        },
      });
    };
    this.gauges = [
      gauge('kvmq_queue_messages', 'Messages in the queue by state (failed ones apart)', ['queue', 'state'], (g, r) => {
        if (r.status === null) return;
        for (const state of MESSAGE_STATES) g.set({ queue: r.queue, state }, r.status.counts[state]);
      }),
      gauge('kvmq_queue_paused', '1 while the queue is paused (workers claim nothing), else 0', ['queue'], (g, r) => {
        if (r.status !== null) g.set({ queue: r.queue }, r.status.paused ? 1 : 0);
      }),
      gauge('kvmq_queue_consumers', 'Live consumers registered on the queue, in every process', ['queue'], (g, r) => {
        if (r.status !== null) g.set({ queue: r.queue }, r.status.consumers.length);
      }),
      gauge('kvmq_queue_dry_runs', 'Claims in a row that found nothing, queue-wide', ['queue'], (g, r) => {
        if (r.status !== null) g.set({ queue: r.queue }, r.status.dryRuns);
      }),
      gauge(
        'kvmq_queue_oldest_waiting_age_seconds',
        'Seconds since the message next in line (first of the queued listing) was enqueued; 0 when none waits',
        ['queue'],
        (g, r) => {
          if (r.status !== null) g.set({ queue: r.queue }, r.oldestAgeSeconds ?? 0);
        },
      ),
    ];
  }

  all(): Metric[] {
    return [...this.gauges, this.readErrors];
  }

  private readAll(): Promise<QueueReading[]> {
    if (this.reading !== null) return this.reading;
    const reading = this.read();
    this.reading = reading;
    // Kept while the scrape runs, so the gauges share it; the next scrape reads afresh.
    const forget = (): void => {
      if (this.reading === reading) this.reading = null;
    };
    reading.then(forget, forget);
    return reading;
  }

  private async read(): Promise<QueueReading[]> {
    const queues = this.selection ?? (await this.listQueues());
    const readings: QueueReading[] = new Array<QueueReading>(queues.length);
    let next = 0;
    const reader = async (): Promise<void> => {
      while (next < queues.length) {
        const index = next++;
        const queue = queues[index] as string;
        readings[index] = await this.readQueue(queue);
      }
    };
    await Promise.all(Array.from({ length: Math.min(READ_CONCURRENCY, queues.length) }, reader));
    return readings;
  }

  /** Every queue of the store; none when the listing fails (counted under the queue name `*`, never a queue's). */
  private async listQueues(): Promise<readonly string[]> {
    try {
      return await this.store.queues();
    } catch {
      this.readErrors.inc({ queue: ALL_QUEUES });
      return [];
    }
  }

  private async readQueue(queue: string): Promise<QueueReading> {
    try {
      const [status, head] = await Promise.all([
        this.store.queueStatus(queue),
        this.store.list(queue, { states: ['queued'], outcome: null, limit: 1, cursor: null, payload: false }),
      ]);
      const first = head.messages[0];
      const oldestAgeSeconds = first === undefined ? null : Math.max(0, Date.now() - first.status.enqueuedAt) / 1000;
      return { queue, status, oldestAgeSeconds };
    } catch {
      this.readErrors.inc({ queue });
      return { queue, status: null, oldestAgeSeconds: null };
    }
  }
}
