/**
 * A queue bound to a name and typed end to end: `client.queue<Payload, Result>(name)`. It adds no behaviour of
 * its own; each method is the client's method of the same name with the queue given and the types carried, so
 * a handler's `job.payload` is a `Payload` and what `waitFor` and `status` return carries a `Result`. The types
 * are a promise of the caller's, not checked at run time: JSON stays the encoding, and bytes stay bytes.
 */
import type { WaitForOptions } from '../events/options.js';
import type { WaitResult } from '../events/wait-for.js';
import type {
  ActionResult,
  BatchHandler,
  BatchItem,
  EnqueueBatchOptions,
  EnqueueOptions,
  EnqueueResult,
  Handler,
  MessageDetails,
  MessageStatus,
} from '../model/types.js';
import type { UpdateOptions } from '../model/update.js';
import type { BatchWorkerOptions, Worker, WorkerOptions } from '../worker/worker.js';

/** One message of a typed queue's `enqueueBatch`. */
export type TypedBatchItem<P> = Omit<BatchItem, 'payload'> & { readonly payload: P };

/** What a typed queue asks of the client (the Client's own methods). */
export interface QueueMethods {
  enqueue(queue: string, payload: unknown, options?: EnqueueOptions): Promise<EnqueueResult>;
  enqueueBatch(queue: string, items: readonly BatchItem[], options?: EnqueueBatchOptions): Promise<EnqueueResult[]>;
  worker(queue: string, handler: Handler | BatchHandler, options?: WorkerOptions | BatchWorkerOptions): Worker;
  waitFor<R>(queue: string, id: string, options?: WaitForOptions): Promise<WaitResult<R>>;
  status<R>(queue: string, id: string): Promise<MessageStatus<R> | null>;
  show<P, R>(queue: string, id: string): Promise<MessageDetails<P, R> | null>;
  cancel(queue: string, id: string, reason?: string): Promise<ActionResult>;
  update(queue: string, id: string, changes: UpdateOptions): Promise<ActionResult>;
}

/** The only way to build a Queue (`client.queue(name)` calls it): the constructor is private. */
export let makeQueue: <P, R>(client: QueueMethods, name: string) => Queue<P, R>;

export class Queue<P = unknown, R = unknown> {
  readonly name: string;
  readonly #client: QueueMethods;

  static {
    makeQueue = <P, R>(client: QueueMethods, name: string) => new Queue<P, R>(client, name);
  }

  /** Use `client.queue(name)`. */
  private constructor(client: QueueMethods, name: string) {
    this.#client = client;
    this.name = name;
  }

  enqueue(payload: P, options?: EnqueueOptions): Promise<EnqueueResult> {
    return this.#client.enqueue(this.name, payload, options);
  }

  enqueueBatch(items: readonly TypedBatchItem<P>[], options?: EnqueueBatchOptions): Promise<EnqueueResult[]> {
    return this.#client.enqueueBatch(this.name, items, options);
  }

  /** The queue's worker; with the option `batch`, its handler takes a batch (see `client.worker()`). */
  worker(handler: BatchHandler<P, R>, options: BatchWorkerOptions): Worker;
  worker(handler: Handler<P, R>, options?: WorkerOptions): Worker;
  worker(handler: Handler<P, R> | BatchHandler<P, R>, options?: WorkerOptions | BatchWorkerOptions): Worker {
    // The payload's type is the caller's promise: the worker hands the handler whatever was decoded.
    return this.#client.worker(this.name, handler as Handler | BatchHandler, options);
  }

  /** Changes a waiting message: its payload, priority, ready time or filters (see `client.update()`). */
  update(id: string, changes: UpdateOptions<P>): Promise<ActionResult> {
    return this.#client.update(this.name, id, changes);
  }

  waitFor(id: string, options?: WaitForOptions): Promise<WaitResult<R>> {
    return this.#client.waitFor<R>(this.name, id, options);
  }

  status(id: string): Promise<MessageStatus<R> | null> {
    return this.#client.status<R>(this.name, id);
  }

  show(id: string): Promise<MessageDetails<P, R> | null> {
    return this.#client.show<P, R>(this.name, id);
  }

  /** Cancels a waiting, delayed or running message of the queue (see `client.cancel()`). */
  cancel(id: string, reason?: string): Promise<ActionResult> {
    return this.#client.cancel(this.name, id, reason);
  }
}
