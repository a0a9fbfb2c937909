/**
 * Every watch event under a prefix from a revision on, grouped by the revision that made it, so the keys one
 * Txn wrote read together. The store itself does not use it: tests and benches count with it what each change
 * of a queue wrote.
 */
import { prefixEnd, type Kv, type WatchEvent } from './kv.js';

export interface RevisionLog {
  readonly byRevision: ReadonlyMap<number, readonly WatchEvent[]>;
  /** The highest revision seen so far (`from` - 1 before any). */
  last(): number;
  cancel(): Promise<void>;
}

/** Watches `prefix` from revision `from` on; `broken` hears of a watch that ended early. */
export function logRevisions(kv: Kv, prefix: string, from: number, broken: (error: Error) => void): RevisionLog {
  const byRevision = new Map<number, WatchEvent[]>();
  let last = from - 1;
  const watch = kv.watch(
    { key: prefix, end: prefixEnd(prefix), startRevision: from },
    {
      events: (watchEvents) => {
        for (const e of watchEvents) {
          const list = byRevision.get(e.kv.modRevision) ?? [];
          list.push(e);
          byRevision.set(e.kv.modRevision, list);
          last = Math.max(last, e.kv.modRevision);
        }
      },
      broken,
    },
  );
  return { byRevision, last: () => last, cancel: () => watch.cancel() };
}
