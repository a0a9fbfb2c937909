/** Listeners kept per queue, for the wake-ups, event and cancel subscriptions of one process (`T`: what they are told). */
export class QueueListeners<T = void> {
  private readonly sets = new Map<string, Set<(value: T) => void>>();

  /** Adds `listener` for `queue`; returns its removal. */
  add(queue: string, listener: (value: T) => void): () => void {
    let set = this.sets.get(queue);
    if (set === undefined) {
      set = new Set();
      this.sets.set(queue, set);
    }
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.sets.get(queue) === set) this.sets.delete(queue);
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

  clear(): void {
    this.sets.clear();
  }
}
