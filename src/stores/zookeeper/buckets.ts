/**
 * A bucketed list: `<dir>/<bucket>/<prefix><seq>`. A single getChildren on a
 * parent with ~30,000 children exceeds ZooKeeper's default packet limit, so
 * entries go into numbered buckets of at most BUCKET_SIZE: writers append to
 * the last bucket and move on once its sequence number passes the size;
 * readers walk buckets from the first. Emptied buckets (but the last) are
 * deleted, so the bucket list stays short too.
 *
 * Readers keep a view of the bucket list, valid while a data watch on `<dir>`
 * has not fired: every writer touches `<dir>` in the multi that adds an entry,
 * so a claim reads nothing while nothing was added.
 */
import { BUCKET_SIZE, bucketName, compareEntries, parseEntry, type Entry } from './layout.js';
import { isZkError, ZkCode, type ZkOp, type ZkSession } from './client.js';

export class BucketedList {
  /** The bucket writers append to, or null until read. */
  private tail: number | null = null;
  /** Whether the tail bucket is known to exist. */
  private tailMade = false;
  /** Bucket listings read earlier; a bucket other than the tail only loses entries. */
  private readonly listings = new Map<string, Entry[]>();
  /** Buckets whose cached listing proved out of date: read again on next use. */
  private readonly dirty = new Set<string>();
  /**
   * How often each bucket was marked out of date (and the list reset): a listing sent before a mark does not
   * clear it, so a bucket is clean only with a listing read after the version that marked it (see unchangedOp).
   */
  private readonly marks = new Map<string, number>();
  private resets = 0;
  /** Child counts of buckets, with when they were read. */
  private readonly counts = new Map<string, { n: number; at: number }>();
  /** The sub-queue node's data version when the tail was last listed (producers bump it). */
  seenVersion = -1;
  /** The bucket list as last read; trusted while `watching` (no writer touched `<dir>` since). */
  private view: string[] | null = null;
  private watching = false;
  private total: { n: number; at: number } | null = null;

  constructor(
    private readonly zk: ZkSession,
    readonly dir: string,
    /** Operations that go in the multi that makes `<dir>` (a sub-queue's: the queue's marker of new sub-queues). */
    private readonly madeOps: readonly ZkOp[] = [],
  ) {}

  /** The path to create an entry under: `<dir>/<tail bucket>/`; the bucket is made if missing. */
  async tailBucket(): Promise<string> {
    if (this.tail === null) {
      const buckets = await this.buckets();
      this.tail = buckets.length === 0 ? 0 : Number(buckets[buckets.length - 1]);
      this.tailMade = buckets.length > 0;
    }
    return `${this.dir}/${bucketName(this.tail)}`;
  }

  /**
   * The create of the tail bucket, while this writer has moved on to a bucket
   * not known to exist: the multi that adds the first entries makes it, so a
   * full bucket costs no failed multi and no extra round trip.
   */
  tailCreate(bucketPath: string): ZkOp | null {
    if (this.tailMade || this.tail === null || bucketPath !== `${this.dir}/${bucketName(this.tail)}`) return null;
    return { op: 'create', path: bucketPath };
  }

  /** The tail bucket exists (made by our multi, or found made by someone else). */
  noteTailMade(bucketPath: string): void {
    if (this.tail !== null && bucketPath === `${this.dir}/${bucketName(this.tail)}`) this.tailMade = true;
  }

  /** After a create in the tail: move on once the bucket is full. */
  noteCreated(path: string): void {
    const seq = Number(path.slice(-10));
    const bucket = Number(path.slice(this.dir.length + 1, this.dir.length + 11));
    if (seq >= BUCKET_SIZE - 1 && this.tail !== null && bucket >= this.tail) {
      this.tail = bucket + 1;
      this.tailMade = false;
    }
  }

  /** The tail bucket is missing (deleted while empty, or never made): make it. */
  async makeTail(): Promise<void> {
    if (this.madeOps.length === 0) await this.zk.ensure(this.dir).catch(() => undefined);
    else if (await this.makeDir()) return;
    await this.zk.ensure(await this.tailBucket());
    this.tailMade = true;
  }

  /** Makes `<dir>` and its tail bucket with `madeOps`, in one multi; false when `<dir>` was there already. */
  private async makeDir(): Promise<boolean> {
    const tail = await this.tailBucket();
    try {
      await this.zk.multi([{ op: 'create', path: this.dir }, { op: 'create', path: tail }, ...this.madeOps]);
    } catch (error) {
      if (isZkError(error, ZkCode.NodeExists) && error.opIndex === 0) return false;
      throw error;
    }
    this.tailMade = true;
    return true;
  }

  /**
   * Forget the tail and cached listings: they are read again. The data watch stays as it is: one still set is
   * on the live node (a deleted node's watch fires), and setting another would add a second listener.
   */
  reset(): void {
    this.tail = null;
    this.listings.clear();
    this.dirty.clear();
    this.resets += 1;
    this.counts.clear();
    this.seenVersion = -1;
    this.view = null;
  }

  /** A watch fired or the session changed: read the bucket list again before trusting it. */
  invalidate(): void {
    this.watching = false;
  }

  /**
   * The buckets, read only when a writer touched `<dir>` since the last read:
   * the data watch is set before the listing (one session, in order), so a
   * write in between fires it. `onChange` runs when it fires. With them, the check (unchangedOp) of the version
   * they are as of: taken at once, as a listing read later (by another claim) may move it on.
   */
  async watchedBuckets(onChange: () => void): Promise<{ buckets: string[]; unchanged: ZkOp | null }> {
    if (this.view !== null && this.watching) return { buckets: this.view, unchanged: this.unchangedOp() };
    // A watch being set by a read under way is not set twice.
    const arm = !this.watching;
    this.watching = true;
    const fired = (): void => {
      this.invalidate();
      onChange();
    };
    const [stat, read] = await Promise.all([
      this.zk.exists(this.dir, arm ? fired : undefined).catch((error: unknown) => {
        if (arm) this.watching = false;
        throw error;
      }),
      this.bucketsAndVersion(),
    ]);
    if (stat === null && arm) this.watching = false;
    if (read.version !== this.seenVersion) {
      // Writers added since: to the tail as last seen, and to any bucket after it (the tail may have moved on).
      const lastSeen = this.view?.[this.view.length - 1];
      for (const bucket of read.buckets) if (lastSeen === undefined || bucket >= lastSeen) this.markDirty(bucket);
      this.markTailDirty(read.buckets);
      this.seenVersion = read.version;
    }
    this.view = read.buckets;
    return { buckets: read.buckets, unchanged: this.unchangedOp() };
  }

  async buckets(): Promise<string[]> {
    return (await this.bucketsAndVersion()).buckets;
  }

  /**
   * The buckets, and the data version and last data change's zxid of the list's own node (-1 and '' when it does
   * not exist).
   */
  async bucketsAndVersion(): Promise<{ buckets: string[]; version: number; mzxid: string }> {
    try {
      const { children, stat } = await this.zk.children(this.dir);
      return { buckets: children.filter((b) => /^\d{10}$/.test(b)).sort(), version: stat.version, mzxid: stat.mzxid };
    } catch (error) {
      if (isZkError(error, ZkCode.NoNode)) return { buckets: [], version: -1, mzxid: '' };
      throw error;
    }
  }

  /** The entries of one bucket, read now (and remembered). */
  async list(bucket: string): Promise<Entry[]> {
    const path = `${this.dir}/${bucket}`;
    const marked = this.marks.get(bucket) ?? 0;
    const resets = this.resets;
    let children: string[];
    try {
      children = (await this.zk.children(path)).children;
    } catch (error) {
      if (!isZkError(error, ZkCode.NoNode)) throw error;
      children = [];
    }
    const entries = children
      .map((name) => parseEntry(path, bucket, name))
      .filter((e): e is Entry => e !== null)
      .sort(compareEntries);
    // Reset while this listing was on its way: it is not kept.
    if (this.resets !== resets) return entries;
    this.listings.set(bucket, entries);
    // Marked out of date while this listing was on its way: it may be older than the version that marked it.
    if ((this.marks.get(bucket) ?? 0) === marked) this.dirty.delete(bucket);
    this.counts.set(bucket, { n: children.length, at: Date.now() });
    return entries;
  }

  /**
   * The bucket list as last read, trusted or not (writers may have added to
   * the tail since: a claim from it may miss the newest entries, never take
   * a wrong one). Reads nothing.
   */
  peekBuckets(): readonly string[] | null {
    return this.view;
  }

  /** Whether the bucket list is kept by a live watch: no writer added to the list since it was read. */
  trusted(): boolean {
    return this.view !== null && this.watching;
  }

  /**
   * A check, for a claim's multi, that no writer added to the list since the version the listings were read at
   * (every writer sets `<dir>` in the multi that adds an entry); null while that version is not known.
   */
  unchangedOp(): ZkOp | null {
    return this.seenVersion < 0 ? null : { op: 'check', path: this.dir, version: this.seenVersion };
  }

  /** A bucket's entries as last read, unless never read or found out of date. Reads nothing. */
  peek(bucket: string): readonly Entry[] | undefined {
    return this.dirty.has(bucket) ? undefined : this.listings.get(bucket);
  }

  /** A bucket's entries as last read, reading it if never read or found out of date. */
  async cached(bucket: string): Promise<Entry[]> {
    const listing = this.listings.get(bucket);
    if (listing === undefined || this.dirty.has(bucket)) return this.list(bucket);
    return listing;
  }

  markDirty(bucket: string): void {
    this.dirty.add(bucket);
    this.marks.set(bucket, (this.marks.get(bucket) ?? 0) + 1);
  }

  /** The tail may have new entries: its listing is read again on next use. */
  markTailDirty(buckets: readonly string[]): void {
    const last = buckets[buckets.length - 1];
    if (last !== undefined) this.markDirty(last);
    if (this.tail !== null && last !== undefined && Number(last) > this.tail) {
      this.tail = Number(last);
      this.tailMade = true;
    }
  }

  /** Entries in the given buckets: child counts (listed or stat'ed) at most `maxAgeMs` old. */
  async size(buckets: readonly string[], maxAgeMs = 5000): Promise<number> {
    const now = Date.now();
    const counts = await Promise.all(
      buckets.map(async (bucket) => {
        const cached = this.counts.get(bucket);
        if (cached !== undefined && now - cached.at < maxAgeMs) return cached.n;
        const stat = await this.zk.exists(`${this.dir}/${bucket}`);
        const n = stat?.numChildren ?? 0;
        this.counts.set(bucket, { n, at: now });
        return n;
      }),
    );
    return counts.reduce((a, b) => a + b, 0);
  }

  /** All entries, for a sub-queue this process only counts: read at most every 5 s, never watched. */
  async totalSize(): Promise<number> {
    const now = Date.now();
    if (this.total !== null && now - this.total.at < 5000) return this.total.n;
    const n = await this.size(await this.buckets());
    this.total = { n, at: now };
    return n;
  }

  /** Drops an entry from the cached listing (it is gone, or taken). */
  forget(entry: Pick<Entry, 'bucket' | 'name'>): void {
    const list = this.listings.get(entry.bucket);
    if (list === undefined) return;
    const at = list.findIndex((e) => e.name === entry.name);
    if (at >= 0) list.splice(at, 1);
    const count = this.counts.get(entry.bucket);
    if (count !== undefined && count.n > 0) count.n -= 1;
  }

  /** Forgets the entry at `path` (under this list) from the cached listing. */
  forgetPath(path: string): void {
    const [bucket, name] = path.slice(this.dir.length + 1).split('/');
    if (bucket !== undefined && name !== undefined) this.forget({ bucket, name });
  }

  /**
   * Deletes an empty bucket that is not the tail. A bucket that still has
   * entries (NOT_EMPTY: a writer whose idea of the tail lagged added one after
   * it was listed) is listed again next time, so that entry is not missed.
   */
  async dropIfEmpty(bucket: string): Promise<void> {
    if (this.tail !== null && Number(bucket) >= this.tail) return;
    try {
      await this.zk.remove(`${this.dir}/${bucket}`, -1);
      this.listings.delete(bucket);
      if (this.view !== null) this.view = this.view.filter((b) => b !== bucket);
    } catch (error) {
      if (isZkError(error, ZkCode.NotEmpty)) this.markDirty(bucket);
      else if (!isZkError(error, ZkCode.NoNode)) throw error;
    }
  }
}
