/** A binary min-heap of (time, item), for the dispatcher's timers: backoffs that end and locks that expire. */
export class TimeHeap<T> {
  private readonly times: number[] = [];
  private readonly items: T[] = [];

  get size(): number {
    return this.items.length;
  }

  push(time: number, item: T): void {
    this.times.push(time);
    this.items.push(item);
    let i = this.items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if ((this.times[parent] ?? 0) <= time) break;
      this.swap(i, parent);
      i = parent;
    }
  }

  /** The earliest time, or Infinity when empty. */
  peekTime(): number {
    return this.times[0] ?? Infinity;
  }

  /** Removes and returns the earliest item whose time is at or before `now`. */
  popDue(now: number): { time: number; item: T } | null {
    if (this.items.length === 0 || (this.times[0] ?? Infinity) > now) return null;
    const time = this.times[0] ?? 0;
    const item = this.items[0] as T;
    const lastTime = this.times.pop() ?? 0;
    const lastItem = this.items.pop() as T;
    if (this.items.length > 0) {
      this.times[0] = lastTime;
      this.items[0] = lastItem;
      this.sink(0);
    }
    return { time, item };
  }

  private sink(i: number): void {
    const n = this.items.length;
    for (;;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let smallest = i;
      if (left < n && (this.times[left] ?? 0) < (this.times[smallest] ?? 0)) smallest = left;
      if (right < n && (this.times[right] ?? 0) < (this.times[smallest] ?? 0)) smallest = right;
      if (smallest === i) return;
      this.swap(i, smallest);
      i = smallest;
    }
  }

  private swap(a: number, b: number): void {
    const t = this.times[a] ?? 0;
    this.times[a] = this.times[b] ?? 0;
    this.times[b] = t;
    const item = this.items[a] as T;
    this.items[a] = this.items[b] as T;
    this.items[b] = item;
  }
}

/**
 * Items kept sorted by a string key (a message's ordered-queue key), taken
 * from the front. Arrivals almost always sort last, so adding is an append;
 * removal is lazy (the caller checks an item still belongs when it takes it).
 */
export class SortedQueue<T extends { readonly orderKey: string }> {
  private items: T[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  add(item: T): void {
    const last = this.items[this.items.length - 1];
    if (last === undefined || this.items.length === this.head || last.orderKey <= item.orderKey) {
      this.items.push(item);
      return;
    }
    let lo = this.head;
    let hi = this.items.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((this.items[mid]?.orderKey ?? '') <= item.orderKey) lo = mid + 1;
      else hi = mid;
    }
    this.items.splice(lo, 0, item);
  }

  /** The first item for which `valid` holds, dropping invalid ones met on the way; null when none. */
  peek(valid: (item: T) => boolean): T | null {
    while (this.head < this.items.length) {
      const item = this.items[this.head] as T;
      if (valid(item)) return item;
      this.head += 1;
    }
    this.compact();
    return null;
  }

  /** Every item still held, in order (for pruning after the tail of a large backlog was dropped). */
  values(): T[] {
    return this.items.slice(this.head);
  }

  replace(items: T[]): void {
    this.items = items;
    this.head = 0;
  }

  private compact(): void {
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    } else if (this.head === this.items.length) {
      this.items = [];
      this.head = 0;
    }
  }
}
