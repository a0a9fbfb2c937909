/**
 * What a worker keeps of a message it holds, and the job its handler is given: one object of a class, whose
 * `signal`, `tx`, `progress` and `log` are on its prototype, so starting a handler makes no closure per message.
 */
import type { FailureReason } from './events.js';
import type { HandlerTransaction } from '../stores/contract/contract.js';
import type { ProcessTrace } from '../tracing/process.js';
import type { MessageReports } from './reports.js';
import type {
  FilterValues,
  Job,
  MessagePolicy,
  MessageStatus,
  Metadata,
  Payload,
  SqlTransaction,
} from '../model/types.js';

export interface Held {
  readonly id: string;
  readonly attempt: number;
  /** Made only when the handler reads `job.signal`: most never do, and one per message costs. */
  controller: AbortController | null;
  /** Why the handler's signal was aborted (lock lost, forced stop, timeout), if it was. */
  abortReason: Error | null;
  /** The message is no longer this worker's (lock lost, forced stop): its result is not stored. */
  takenAway: boolean;
  /** The handler is done and its result is on its way to the store. */
  finishing: boolean;
  /**
   * performance.now() at which the worker gives the message up unless a renewal moved it: the lock's end as
   * the claim or the last acknowledged renewal proves it, less a margin (see fenceMarginMs).
   */
  fenceAt: number;
  /** performance.now() when the handler started. */
  startedAt: number;
  /** Date.now() when the handler started: the history record's start. */
  startedAtWall: number;
  /** The message's own retry policy, over the worker's options. */
  readonly policy: MessagePolicy | null;
  /** Why the attempt failed, should it fail: the handler's own result unless it threw or timed out. */
  cause: FailureReason;
  /** The handling's span, once the handler starts. */
  trace: ProcessTrace;
  /** With `transactional`: the transaction the handler runs in, once opened. */
  transaction: HandlerTransaction | null;
  /** Made on the handler's first `job.progress` or `job.log`: most never report. */
  reports: MessageReports | null;
}

/** What `job.progress` and `job.log` call: the worker holding the message. */
export interface JobReporter {
  reportProgress(held: Held, value: unknown): boolean;
  reportLine(held: Held, line: string): boolean;
  /** job.children: the statuses of the message's children. */
  readChildren(id: string): Promise<MessageStatus[]>;
}

export function abortSignal(held: Held, reason: Error): void {
  held.abortReason ??= reason;
  held.controller?.abort(reason);
}

export function takeAway(held: Held, reason: Error): void {
  held.takenAway = true;
  // Not this worker's to report on any more: what is pending is dropped, never written late.
  held.reports?.discard();
  abortSignal(held, reason);
}

/** The job a handler is given for a held message. */
export class HeldJob implements Job {
  readonly #held: Held;
  readonly #reporter: JobReporter;

  constructor(
    readonly queue: string,
    readonly id: string,
    readonly payload: Payload,
    readonly metadata: Metadata,
    readonly filters: FilterValues,
    readonly attempt: number,
    held: Held,
    reporter: JobReporter,
  ) {
    this.#held = held;
    this.#reporter = reporter;
  }

  // Getters that bind, so `({ progress }) => progress(1)` works too; made only when a handler reads them.
  get progress(): (value: unknown) => boolean {
    const held = this.#held;
    const reporter = this.#reporter;
    return (value) => reporter.reportProgress(held, value);
  }

  get log(): (line: string) => boolean {
    const held = this.#held;
    const reporter = this.#reporter;
    return (line) => reporter.reportLine(held, line);
  }

  get children(): () => Promise<MessageStatus[]> {
    const reporter = this.#reporter;
    const { id } = this;
    return () => reporter.readChildren(id);
  }

  /** Made on first read: most handlers never read it, and one per message costs. */
  get signal(): AbortSignal {
    const held = this.#held;
    if (held.controller === null) {
      held.controller = new AbortController();
      if (held.abortReason !== null) held.controller.abort(held.abortReason);
    }
    return held.controller.signal;
  }

  get tx(): SqlTransaction | undefined {
    return this.#held.transaction?.tx;
  }
}
