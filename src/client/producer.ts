/**
 * Where a client's enqueues go (the tick's shared store call, or the caller's transaction), and the queue
 * upkeep producers do after enqueues (GC at the queue's stored interval, never in the caller's way).
 */
import { DEFAULT_QUEUE_CONFIG } from '../model/config.js';
import type { EnqueueResult, QueueConfig, SqlTransaction } from '../model/types.js';
import type { NewMessage, Store } from '../stores/contract/contract.js';
import { TickBatcher } from './tick-batcher.js';

export type Send = (messages: readonly NewMessage[]) => Promise<EnqueueResult[]>;

/** The enqueues of one tick, sent together. */
export function tickEnqueues(store: Store): TickBatcher<NewMessage, EnqueueResult> {
  // A store that answers each message on its own (group commit) resumes each caller with its own messages.
  return new TickBatcher(
    store.enqueueEach === undefined
      ? (queue, messages) => store.enqueue(queue, messages)
      : (queue, messages) => store.enqueueEach?.(queue, messages) ?? [],
    store.capabilities.enqueueCallMessages,
  );
}

/**
 * Where an enqueue's messages go: the tick's shared call, or, with `tx`, the caller's transaction on its own
 * (a transaction cannot be shared with other callers' messages). A store that cannot is a TypeError.
 */
export function senderOf(
  store: Store,
  enqueues: TickBatcher<NewMessage, EnqueueResult>,
  queue: string,
  tx: SqlTransaction | undefined,
): Send {
  if (tx === undefined) return (messages) => enqueues.add(queue, messages);
  if (typeof (tx as Partial<SqlTransaction> | null)?.query !== 'function') {
    throw new TypeError('tx must be an open transaction: a pg client inside BEGIN, or { query(text, values) }');
  }
  if (store.enqueueIn === undefined) {
    throw new TypeError(
      `tx is not available on this ${store.kind} store: only a PostgreSQL store (postgres://) can enqueue ` +
        "inside your database's transaction",
    );
  }
  return (messages) => store.enqueueIn?.(tx, queue, messages) ?? Promise.resolve([]);
}

/** Producer-side GC, as the zkmq design asks: at most once per stored interval, never in the caller's way. */
export class ProducerGc {
  private readonly lastGc = new Map<string, number>();
  private readonly running = new Set<Promise<unknown>>();

  constructor(
    private readonly store: Store,
    private readonly onError: (error: unknown) => void,
  ) {}

  /** Runs the queue's GC in the background unless it ran within its interval (`config`: as last read). */
  maybeRun(queue: string, config: QueueConfig | undefined): void {
    const now = Date.now();
    const interval = config?.gcIntervalMs ?? DEFAULT_QUEUE_CONFIG.gcIntervalMs;
    if (now - (this.lastGc.get(queue) ?? 0) < interval) return;
    this.lastGc.set(queue, now);
    const run = this.store
      .gc(queue, false)
      .catch(this.onError)
      .finally(() => this.running.delete(run));
    this.running.add(run);
  }

  /** Settles once every GC under way now has. */
  settled(): Promise<unknown> {
    return Promise.allSettled([...this.running]);
  }
}
