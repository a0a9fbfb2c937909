/**
 * Gathers calls made in the same tick into one call per key: enqueues from
 * many callers reach the store as one batch (one transaction, one script
 * call), and each caller still gets its own results, resolved once the store
 * has applied the whole batch, or, from a store that answers each item on its
 * own, once its own items are applied.
 *
 * With `maxItems`, a batch is sent as soon as it holds that many items and the
 * tick's later calls start the next one: the store works on the first call
 * while the caller's process prepares the next (a pipelined connection). A
 * caller's items are never split between calls.
 */
interface Pending<I, R> {
  items: I[];
  waiters: { start: number; count: number; resolve: (results: R[]) => void; reject: (error: unknown) => void }[];
}

/** One call for the whole batch: a promise of all results, or one promise per item, each settled on its own. */
export type BatchRun<I, R> = (key: string, items: I[]) => Promise<R[]> | readonly Promise<R>[];

export class TickBatcher<I, R> {
  private readonly pending = new Map<string, Pending<I, R>>();

  /** `maxItems`: send a batch once it holds this many items, without waiting for the tick's end (default: never). */
  constructor(
    private readonly run: BatchRun<I, R>,
    private readonly maxItems = Infinity,
  ) {}

  add(key: string, items: readonly I[]): Promise<R[]> {
    let batch = this.pending.get(key);
    if (batch === undefined) {
      const fresh: Pending<I, R> = { items: [], waiters: [] };
      batch = fresh;
      this.pending.set(key, fresh);
      queueMicrotask(() => void this.flush(key, fresh));
    }
    const start = batch.items.length;
    for (const item of items) batch.items.push(item);
    const pending = batch;
    const promise = new Promise<R[]>((resolve, reject) =>
      pending.waiters.push({ start, count: items.length, resolve, reject }),
    );
    if (pending.items.length >= this.maxItems) void this.flush(key, pending);
    return promise;
  }

  private async flush(key: string, batch: Pending<I, R>): Promise<void> {
    // Already sent (full before the tick ended): a later batch of the key has its own flush.
    if (this.pending.get(key) !== batch) return;
    this.pending.delete(key);
    let answers: Promise<R[]> | readonly Promise<R>[];
    try {
      answers = this.run(key, batch.items);
    } catch (error) {
      for (const w of batch.waiters) w.reject(error);
      return;
    }
    if (Array.isArray(answers)) {
      // One answer per item: each caller resumes once its own items are stored, not the whole batch.
      const each = answers as readonly Promise<R>[];
      for (const w of batch.waiters) {
        if (w.count === 1) (each[w.start] as Promise<R>).then((r) => w.resolve([r]), w.reject);
        else Promise.all(each.slice(w.start, w.start + w.count)).then(w.resolve, w.reject);
      }
      return;
    }
    try {
      const results = await (answers as Promise<R[]>);
      for (const w of batch.waiters) w.resolve(results.slice(w.start, w.start + w.count));
    } catch (error) {
      for (const w of batch.waiters) w.reject(error);
    }
  }
}
