/**
 * What handlers read and write through their job besides the payload: `job.progress` and `job.log` (written by a
 * ReportWriter made on the first report) and `job.children`.
 */
import { JobReportError } from '../model/errors.js';
import type { MessageStatus } from '../model/types.js';
import type { Store } from '../stores/contract/contract.js';
import type { Announcer } from './announcer.js';
import type { Held, JobReporter } from './held.js';
import { MessageReports, ReportWriter } from './reports.js';
import type { WorkerView } from './view.js';

export class JobReports implements JobReporter {
  /** Writes handlers' reports; made on the first. */
  private writer: ReportWriter | null = null;

  constructor(
    private readonly worker: WorkerView,
    private readonly store: Store,
    private readonly held: ReadonlyMap<string, Held>,
    private readonly announcer: Announcer,
  ) {}

  /** job.progress */
  reportProgress(held: Held, value: unknown): boolean {
    return this.reportWriter().progress(this.reportsOf(held), value);
  }

  /** job.log */
  reportLine(held: Held, line: string): boolean {
    return this.reportWriter().log(this.reportsOf(held), line);
  }

  /** job.children */
  readChildren(id: string): Promise<MessageStatus[]> {
    const { store } = this;
    if (store.flowChildren === undefined) {
      return Promise.reject(new TypeError(`job.children() is not available on the ${store.kind} store: no flows`));
    }
    return store.flowChildren(this.worker.queue, id);
  }

  /** Writes what the handler of a message reported and has not been written yet: its finish comes after. */
  async settle(reports: MessageReports): Promise<void> {
    await this.writer?.settle(reports);
  }

  /** The writer of handlers' reports, made on the first one. */
  private reportWriter(): ReportWriter {
    if (this.writer !== null) return this.writer;
    const { store, announcer } = this;
    if (store.report === undefined) {
      throw new JobReportError(`job.progress and job.log are not available on the ${store.kind} store`);
    }
    this.writer = new ReportWriter(
      store.report.bind(store),
      this.worker.queue,
      this.worker.id,
      (reports) => {
        const held = this.held.get(reports.id);
        if (held?.reports === reports && !held.finishing) announcer.lost(held);
      },
      announcer.reportError,
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
}
