/**
 * Listeners kept per queue (or per channel), for the wake-ups, event and cancel subscriptions of one process
 * (`T`: what they are told). Every store keeps its subscribers in these.
 */
export class QueueListeners<T = void> {
  private readonly sets = new Map<string, Set<(value: T) => void>>();

  /**
   * @param watch told when a queue gets its first listener and when its last one goes, for a store that
   *   subscribes to something of its own (a channel) only while anyone listens.
   */
  constructor(private readonly watch?: { first(queue: string): void; last(queue: string): void }) {}

  /** Adds `listener` for `queue`; returns its removal. */
  add(queue: string, listener: (value: T) => void): () => void {
    let set = this.sets.get(queue);
    const first = set === undefined;
    if (set === undefined) {
      set = new Set();
      this.sets.set(queue, set);
    }
    set.add(listener);
    if (first) this.watch?.first(queue);
    return () => {
      if (!set.delete(listener) || set.size > 0 || this.sets.get(queue) !== set) return;
      this.sets.delete(queue);
      this.watch?.last(queue);
    };
  }

  notify(queue: string, value: T): void {
    for (const listener of [...(this.sets.get(queue) ?? [])]) listener(value);
  }

  has(queue: string): boolean {
    return (this.sets.get(queue)?.size ?? 0) > 0;
  }

  queues(): string[] {
    return [...this.sets.keys()];
  }

  /** Every listener with its queue (a store that registers them elsewhere too removes them all at its close). */
  *entries(): Generator<[string, (value: T) => void]> {
    for (const [queue, set] of this.sets) for (const listener of set) yield [queue, listener];
  }

  clear(): void {
    this.sets.clear();
  }
}
