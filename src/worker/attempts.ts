/**
 * Running the handler on held messages: one message or a batch per call, within the message's (or the worker's)
 * timeout, in a transaction with its outcome where asked (`transactional`), and the finish each attempt earns
 * (retry with backoff, or error once `maxAttempts` are spent).
 */
import { EXPIRED_ERROR, expired, policyBackoffMs } from '../model/policy.js';
import type { BatchHandler, Handler, HandlerResult, Job } from '../model/types.js';
import type { AttemptFinish, Store } from '../stores/contract/contract.js';
import { failAll, finishesFromBatch, type BatchMember } from './batch.js';
import { abortSignal, type Held } from './held.js';
import type { CheckedWorkerOptions } from './options.js';
import { finishFromFailure, finishFromResult, finishFromThrow, thrownText, timeoutError } from './outcome.js';
import type { WorkerView } from './view.js';

export class Attempts {
  constructor(
    private readonly worker: WorkerView,
    private readonly store: Store,
    private readonly handler: Handler | BatchHandler,
    private readonly options: CheckedWorkerOptions,
    /** A handler call returned (or timed out) for this many messages: their slots are free. */
    private readonly returned: (messages: number) => void,
  ) {}

  /** One message's attempt: expired before it started, or the handler's call (in a transaction if asked). */
  async one(held: Held, job: Job): Promise<AttemptFinish> {
    try {
      if (pastTimeToLive(held, held.startedAtWall)) return expiredFinish(held);
      return this.options.transactional ? await this.inTransaction(held, job) : await this.attempt(held, job);
    } finally {
      this.returned(1);
    }
  }

  /**
   * A batch's handler call: one finish per message. Its timeout is the shortest of its messages' (or the
   * worker's); a timeout or a throw fails each message under its own attempts.
   */
  async batch(batch: readonly Held[], jobs: readonly Job[]): Promise<AttemptFinish[]> {
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
      this.returned(batch.length);
    }
  }

  /**
   * The attempt inside a transaction the store opens for it (option `transactional`). One that cannot be opened
   * is a retry at once, the handler not run.
   */
  private async inTransaction(held: Held, job: Job): Promise<AttemptFinish> {
    try {
      held.transaction = (await this.store.beginHandlerTransaction?.()) ?? null;
    } catch (error) {
      this.worker.instruments?.storeError(this.worker.queue, 'finish');
      held.cause = 'thrown';
      const message = `could not open the handler's transaction: ${error instanceof Error ? error.message : String(error)}`;
      return { id: held.id, attempt: held.attempt, outcome: 'retry', backoffMs: 0, error: message };
    }
    return this.attempt(held, job);
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
}

/**
 * Past its time to live at its first delivery (a retried attempt had started in time). The property read is all
 * a message without one costs.
 */
export function pastTimeToLive(held: Held, wallNow: number): boolean {
  return held.policy?.expireAt !== undefined && held.attempt === 1 && expired(held.policy, wallNow);
}

function expiredFinish(held: Held): AttemptFinish {
  held.cause = 'expired';
  return { id: held.id, attempt: held.attempt, outcome: 'error', backoffMs: 0, error: EXPIRED_ERROR };
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
