/**
 * Gathers calls made in the same tick into one call per key: enqueues from
 * many callers reach the store as one batch (one transaction, one script
 * call), and each caller still gets its own results, resolved once the store
 * has applied the whole batch, or, from a store that answers each item on its
 * own, once its own items are applied.
 */
interface Pending<I, R> {
  items: I[];
  waiters: { start: number; count: number; resolve: (results: R[]) => void; reject: (error: unknown) => void }[];
}

/** One call for the whole batch: a promise of all results, or one promise per item, each settled on its own. */
export type BatchRun<I, R> = (key: string, items: I[]) => Promise<R[]> | readonly Promise<R>[];

export class TickBatcher<I, R> {
  private readonly pending = new Map<string, Pending<I, R>>();

  constructor(private readonly run: BatchRun<I, R>) {}

  add(key: string, items: readonly I[]): Promise<R[]> {
    let batch = this.pending.get(key);
    if (batch === undefined) {
      batch = { items: [], waiters: [] };
      this.pending.set(key, batch);
      queueMicrotask(() => void this.flush(key));
    }
    const start = batch.items.length;
    for (const item of items) batch.items.push(item);
    const pending = batch;
    return new Promise((resolve, reject) => pending.waiters.push({ start, count: items.length, resolve, reject }));
  }

  private async flush(key: string): Promise<void> {
    const batch = this.pending.get(key);
    if (batch === undefined) return;
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
