/**
 * What a worker tells of the messages it held, and of the errors it recovered from: the metrics' counts and the
 * worker's events, each event built only when someone listens (most workers have no listeners).
 */
import { EventEmitter } from 'node:events';
import { decodePayload } from '../model/payload.js';
import type { Finish } from '../stores/contract/contract.js';
import { CanceledError } from '../model/errors.js';
import { takeAway, type Held } from './held.js';
import type { WorkerEvents } from './events.js';
import type { WorkerView } from './view.js';

/** The worker as its announcer sees it: the emitter of its events. */
export type AnnouncingWorker = WorkerView & EventEmitter<WorkerEvents>;

export class Announcer {
  constructor(
    private readonly worker: AnnouncingWorker,
    private readonly onError: ((error: unknown) => void) | null,
  ) {}

  /** A recovered error goes to `onError` and `error` listeners, or to stderr when there are neither. */
  readonly reportError = (error: unknown): void => {
    const { onError, worker } = this;
    const listened = worker.listenerCount('error') > 0;
    if (onError !== null) onError(error);
    if (listened) {
      try {
        worker.emit('error', error);
      } catch (thrown) {
        (onError ?? printError)(thrown);
      }
    }
    if (onError === null && !listened) printError(error);
  };

  /** A listener's promise rejected (with `captureRejections`). */
  listenerRejected(error: Error, event: unknown): void {
    // An `error` listener that rejects must not be fed its own error again.
    if (event === 'error') (this.onError ?? printError)(error);
    else this.reportError(error);
  }

  /** The outcome the store kept, counted and told. */
  handled(held: Held, finish: Finish, durationMs: number): void {
    const { worker } = this;
    const { queue } = worker;
    worker.instruments?.handled(queue, finish.outcome);
    const { id, attempt, cause: reason } = held;
    const { error, backoffMs } = finish;
    if (finish.outcome === 'success') {
      if (worker.listenerCount('completed') > 0) {
        const { result } = finish;
        const event = { queue, id, attempt, durationMs };
        this.tell(
          'completed',
          result === undefined ? event : { ...event, result: decodePayload(result.bytes, result.encoding) },
        );
      }
    } else if (finish.outcome === 'retry') {
      if (worker.listenerCount('retrying') > 0) {
        this.tell('retrying', { queue, id, attempt, durationMs, error, reason, backoffMs });
      }
    } else if (worker.listenerCount('failed') > 0) {
      this.tell('failed', { queue, id, attempt, durationMs, error, reason });
    }
  }

  /** The message's lock is gone (the store says so, or it ended unrenewed): stop its handler and say so, once. */
  lost(held: Held, reason: Error = new Error('lock lost')): void {
    if (held.takenAway) return;
    takeAway(held, reason);
    this.stalled(held.id, held.attempt);
  }

  /** A message lost to this worker, counted and told as `stalled`. */
  stalled(id: string, attempt: number): void {
    const { worker } = this;
    worker.instruments?.handled(worker.queue, 'lost');
    if (worker.listenerCount('stalled') > 0) this.tell('stalled', { queue: worker.queue, id, attempt });
  }

  /** A held message was canceled: it failed already, its handler is told to stop, and what it returns is dropped. */
  canceled(held: Held): void {
    const { worker } = this;
    const { queue } = worker;
    takeAway(held, new CanceledError(queue, held.id));
    worker.instruments?.handled(queue, 'error');
    if (worker.listenerCount('failed') > 0) {
      const durationMs = held.startedAt === 0 ? 0 : performance.now() - held.startedAt;
      this.tell('failed', {
        queue,
        id: held.id,
        attempt: held.attempt,
        durationMs,
        error: 'canceled',
        reason: 'canceled',
      });
    }
  }

  /** Emits an event; a listener that throws is a recovered error, not the worker's. */
  private tell<K extends Exclude<keyof WorkerEvents, 'error'>>(name: K, ...args: WorkerEvents[K]): void {
    try {
      // emit's typing cannot follow a generic event name; `args` are WorkerEvents[K] by this method's signature.
      (this.worker as EventEmitter).emit(name, ...args);
    } catch (error) {
      this.reportError(error);
    }
  }
}

function printError(error: unknown): void {
  console.error('kvmq worker:', error);
}
