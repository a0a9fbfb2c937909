/**
 * The ready entries of every sub-queue (locked and queued messages) in ready-time order, read only as far as a page
 * needs. Buckets are not in ready-time order (a backoff's entry goes into the tail bucket with a later time), so
 * what lets a listing stop is each bucket's lowest ready time: remembered per sub-queue together with the zxid of
 * the sub-queue node's last data change, which every multi that adds an entry moves. While it has not moved, the
 * buckets have only lost entries, so a remembered lowest time is a lower bound of all a bucket holds; once it moves,
 * every bucket is read again. A page then reads its sub-queues' bucket lists, and bucket listings lowest bound
 * first until what it took comes before every bucket left.
 */
import type { BucketedList } from './buckets.js';
import type { Entry } from './layout.js';

export interface Keyed {
  readonly key: string;
  readonly entry: Entry;
}

/** One sub-queue to read, with its node name (which its keys carry). */
export interface SubQueue {
  readonly list: BucketedList;
  readonly node: string;
}

/** Lowest ready time per bucket (Infinity for an empty one), valid while the sub-queue node's mzxid is `mzxid`. */
interface Bounds {
  readonly mzxid: string;
  readonly lowest: Map<string, number>;
}

const remembered = new WeakMap<BucketedList, Bounds>();

interface Unread {
  readonly sub: SubQueue;
  readonly bucket: string;
  readonly bounds: Bounds;
  /** No entry of the bucket is ready before this. */
  readonly from: number;
}

/**
 * Hands `take` the ready entries (ready by `now`, keyed after `after`) in key order, a run at a time, until it
 * returns a key (the page filled), which is returned; null when every entry was handed over.
 */
export async function walkReady(
  subs: readonly SubQueue[],
  now: number,
  after: string | null,
  take: (entries: readonly Keyed[]) => Promise<string | null>,
): Promise<string | null> {
  const unread = (await Promise.all(subs.map(unreadBuckets)))
    .flat()
    .filter((u) => u.from <= now)
    .sort((a, b) => a.from - b.from);
  let waiting: Keyed[] = [];
  let first = true;
  for (;;) {
    const next = unread[0]?.from ?? Infinity;
    // Every unread entry is ready at `next` or later, so it sorts after each entry ready before.
    const safe = waiting.filter((e) => e.entry.at < next);
    if (safe.length > 0) {
      waiting = waiting.filter((e) => e.entry.at >= next);
      const last = await take(safe);
      if (last !== null) return last;
    }
    if (unread.length === 0) return null;
    // Buckets never read go together on the first round; later rounds read the lowest bound's bucket.
    const reading = first ? unread.filter((u) => u.from === -Infinity) : [];
    if (reading.length === 0) reading.push(unread[0] as Unread);
    first = false;
    unread.splice(0, reading.length);
    const read = await Promise.all(reading.map((u) => readBucket(u, now, after)));
    waiting = sorted([...waiting, ...read.flat()]);
  }
}

async function unreadBuckets(sub: SubQueue): Promise<Unread[]> {
  const { buckets, mzxid } = await sub.list.bucketsAndVersion();
  let bounds = remembered.get(sub.list);
  if (bounds === undefined || bounds.mzxid !== mzxid) {
    bounds = { mzxid, lowest: new Map() };
    remembered.set(sub.list, bounds);
  }
  const known = bounds;
  return buckets.map((bucket) => ({ sub, bucket, bounds: known, from: known.lowest.get(bucket) ?? -Infinity }));
}

/** Lists one bucket, remembering its lowest ready time; returns its ready entries after `after`. */
async function readBucket(u: Unread, now: number, after: string | null): Promise<Keyed[]> {
  const entries = await u.sub.list.list(u.bucket);
  u.bounds.lowest.set(
    u.bucket,
    entries.reduce((low, e) => Math.min(low, e.at), Infinity),
  );
  const out: Keyed[] = [];
  for (const entry of entries) {
    const key = `${entry.name.slice(0, 13)}/${u.sub.node}/${u.bucket}/${entry.name.slice(-10)}`;
    if (entry.at <= now && (after === null || key > after)) out.push({ key, entry });
  }
  return out;
}

export function sorted(entries: Keyed[]): Keyed[] {
  return entries.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}
