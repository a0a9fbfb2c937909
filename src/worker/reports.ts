/**
 * What handlers report while they run (`job.progress`, `job.log`), on its way to the store: coalesced per
 * message (at most one write per REPORT_EVERY_MS, with the latest progress and every line since), the messages
 * due in one tick sent in one store call, and the last of it written before the message's finish, never after.
 */
import { encodeProgress, logLine, REPORT_EVERY_MS } from '../model/reports.js';
import type { Report, Store } from '../stores/contract/contract.js';

/** One held message's reports: what waits to be written, and when it may be. */
export class MessageReports {
  /** The latest progress not yet sent (JSON text), or null. */
  progress: string | null = null;
  /** Log lines not yet sent, oldest first. */
  lines: string[] = [];
  /** performance.now() when the last write was sent: the next goes no sooner than REPORT_EVERY_MS after it. */
  sentAt = -Infinity;
  timer: NodeJS.Timeout | null = null;
  /** The write under way; one at a time per message, so the store sees them in order. */
  writing: Promise<void> | null = null;
  /** Waiting in the writer's batch for this tick. */
  queued = false;
  /** No more is taken: the handler returned (its last reports go with the finish), or the message was lost. */
  closed = false;

  constructor(
    readonly id: string,
    readonly attempt: number,
  ) {}

  get pending(): boolean {
    return this.progress !== null || this.lines.length > 0;
  }

  /** Drops what is pending and takes no more: the message is not this worker's any longer. */
  discard(): void {
    this.closed = true;
    this.progress = null;
    this.lines = [];
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  /** What is pending, as one report, leaving nothing pending. */
  take(): Report {
    const report: Report = { id: this.id, attempt: this.attempt, progress: this.progress, lines: this.lines };
    this.progress = null;
    this.lines = [];
    return report;
  }

  /** Puts back a report whose write failed, under what came since (a newer progress wins, lines keep order). */
  restore(report: Report): void {
    this.progress ??= report.progress;
    this.lines = report.lines.concat(this.lines);
  }
}

/** A worker's report writes to one queue. */
export class ReportWriter {
  private due: MessageReports[] = [];
  private sendScheduled = false;

  constructor(
    /** The store's `report`, bound. */
    private readonly storeReport: NonNullable<Store['report']>,
    private readonly queue: string,
    private readonly consumerId: string,
    /** The store says the consumer no longer holds the message. */
    private readonly onLost: (reports: MessageReports) => void,
    private readonly onError: (error: unknown) => void,
  ) {}

  /** job.progress: checked here (throws on what cannot be stored), then written when its turn comes. */
  progress(reports: MessageReports, value: unknown): boolean {
    const text = encodeProgress(value);
    if (reports.closed) return false;
    reports.progress = text;
    this.want(reports);
    return true;
  }

  /** job.log: as progress, one line appended. */
  log(reports: MessageReports, line: unknown): boolean {
    const text = logLine(line);
    if (reports.closed) return false;
    reports.lines.push(text);
    this.want(reports);
    return true;
  }

  /**
   * Before the message's finish: no more is taken, the write under way is awaited and what is pending is written,
   * so the finish comes after all of it. A failed write is reported; the finish goes on (its lock still holds).
   */
  async settle(reports: MessageReports): Promise<void> {
    reports.closed = true;
    if (reports.timer !== null) clearTimeout(reports.timer);
    reports.timer = null;
    while (reports.writing !== null) await reports.writing;
    if (!reports.pending) return;
    try {
      const [result] = await this.storeReport(this.queue, this.consumerId, [reports.take()]);
      if (result === 'lost') this.onLost(reports);
    } catch (error) {
      this.onError(error);
    }
  }

  /** Schedules a write: in this tick's batch when the last was long enough ago, else when it will have been. */
  private want(reports: MessageReports): void {
    // A write under way looks again when it ends; a queued or timed one takes this too.
    if (reports.queued || reports.timer !== null || reports.writing !== null) return;
    const wait = reports.sentAt + REPORT_EVERY_MS - performance.now();
    if (wait <= 0) this.enqueue(reports);
    else {
      reports.timer = setTimeout(() => {
        reports.timer = null;
        this.enqueue(reports);
      }, wait);
    }
  }

  private enqueue(reports: MessageReports): void {
    if (reports.closed) return;
    reports.queued = true;
    this.due.push(reports);
    if (this.sendScheduled) return;
    this.sendScheduled = true;
    setImmediate(this.send);
  }

  private readonly send = (): void => {
    this.sendScheduled = false;
    const batch = this.due.filter((reports) => !reports.closed && reports.pending);
    for (const reports of this.due) reports.queued = false;
    this.due = [];
    if (batch.length === 0) return;
    const writing = this.write(batch);
    for (const reports of batch) reports.writing = writing;
  };

  private async write(batch: readonly MessageReports[]): Promise<void> {
    const sentAt = performance.now();
    const taken = batch.map((reports) => {
      reports.sentAt = sentAt;
      return reports.take();
    });
    try {
      const results = await this.storeReport(this.queue, this.consumerId, taken);
      results.forEach((result, i) => {
        const reports = batch[i] as MessageReports;
        if (result === 'lost' && !reports.closed) this.onLost(reports);
      });
    } catch (error) {
      // Kept for the next write, or for the one before the finish.
      batch.forEach((reports, i) => reports.restore(taken[i] as Report));
      this.onError(error);
    } finally {
      for (const reports of batch) {
        reports.writing = null;
        if (!reports.closed && reports.pending) this.want(reports);
      }
    }
  }
}
