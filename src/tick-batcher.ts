/**
 * Gathers calls made in the same tick into one call per key: enqueues from
 * many callers reach the store as one batch (one transaction, one script
 * call), and each caller still gets its own results, resolved only once the
 * store has applied the whole batch.
 */
interface Pending<I, R> {
  items: I[];
  waiters: { start: number; count: number; resolve: (results: R[]) => void; reject: (error: unknown) => void }[];
}

export class TickBatcher<I, R> {
  private readonly pending = new Map<string, Pending<I, R>>();

  constructor(private readonly run: (key: string, items: I[]) => Promise<R[]>) {}

  add(key: string, items: readonly I[]): Promise<R[]> {
    let batch = this.pending.get(key);
    if (batch === undefined) {
      batch = { items: [], waiters: [] };
      this.pending.set(key, batch);
      queueMicrotask(() => void this.flush(key));
    }
    const start = batch.items.length;
    batch.items.push(...items);
    const pending = batch;
    return new Promise((resolve, reject) => pending.waiters.push({ start, count: items.length, resolve, reject }));
  }

  private async flush(key: string): Promise<void> {
    const batch = this.pending.get(key);
    if (batch === undefined) return;
    this.pending.delete(key);
    try {
      const results = await this.run(key, batch.items);
      for (const w of batch.waiters) w.resolve(results.slice(w.start, w.start + w.count));
    } catch (error) {
      for (const w of batch.waiters) w.reject(error);
    }
  }
}
