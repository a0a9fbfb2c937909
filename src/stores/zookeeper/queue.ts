/**
 * What a store knows about one queue: its paths, its sub-queues and done list
 * (with their cached bucket listings), the task buckets known to exist, and
 * the check that the queue's dir is kvmq's. Claims see the queue through a
 * view (the sub-queues and the queue-wide dry-run counters) kept by watches:
 * it is read again only after something changed.
 */
import { StoreLayoutError } from '../../model/errors.js';
import { BucketedList } from './buckets.js';
import { isZkError, ZkCode, type ZkOp, type ZkSession } from './client.js';
import { readConf, type ConfRead } from './conf.js';
import { EventLog } from './events.js';
import { decodePolicy } from '../../model/policy.js';
import { QUEUE_MARKER, QueuePaths, classNode, entryPrefix, parseSubNode, subNode, type SubKey } from './layout.js';
import type { QueueConfig } from '../../model/types.js';

/** The queue-wide end-of-queue counters, in the data of `/queue`. */
export interface Counters {
  readonly dryRuns: number;
  readonly eoqUntil: number;
}

export function parseCounters(data: Buffer): Counters {
  try {
    const parsed = JSON.parse(data.toString('utf8')) as Partial<Counters>;
    return { dryRuns: parsed.dryRuns ?? 0, eoqUntil: parsed.eoqUntil ?? 0 };
  } catch {
    return { dryRuns: 0, eoqUntil: 0 };
  }
}

export interface QueueView {
  /** The sub-queues (one per filter class and priority), lowest priority number first. */
  readonly subs: readonly SubKey[];
  readonly counters: Counters;
  /**
   * The data version of the queue's dir read just before `subs` (null: not read): every multi that makes a
   * sub-queue sets that node, so a claim that checks it learns of a sub-queue made since, which `subs` lacks.
   */
  readonly subsMade: number | null;
}

export class QueueContext {
  readonly paths: QueuePaths;
  readonly done: BucketedList;
  readonly failed: BucketedList;
  /** Backoffs (pending or done) by their end: what a count walks instead of the ready backlog. */
  readonly waiting: BucketedList;
  /** Messages with a time to live by its deadline, written at their enqueue: what the GC's sweep walks. */
  readonly expiring: BucketedList;
  /** Flows' parents waiting for their children: what counts and listings of `waiting-children` read. */
  readonly parents: BucketedList;
  readonly events: EventLog;
  private readonly classes = new Map<string, BucketedList>();
  private readonly taskBuckets = new Set<string>();
  /** Whether every task bucket that exists is in taskBuckets (listed once per session). */
  private taskBucketsListed = false;
  private ensured: Promise<void> | null = null;
  private view: QueueView | null = null;
  private watchingData = false;
  private watchingChildren = false;
  /** A claim found a sub-queue made since the listing: list again, keeping the children watch if it is set. */
  private subsStale = false;
  private conf: ConfRead | null = null;
  private watchingConf = false;

  constructor(
    private readonly zk: ZkSession,
    readonly name: string,
    /** Called when a watch says the queue changed: idle workers look again. */
    private readonly onChange: () => void = () => undefined,
  ) {
    this.paths = new QueuePaths(name);
    this.done = new BucketedList(zk, this.paths.done);
    this.failed = new BucketedList(zk, this.paths.failed);
    this.waiting = new BucketedList(zk, this.paths.waiting);
    this.expiring = new BucketedList(zk, this.paths.expiry);
    this.parents = new BucketedList(zk, this.paths.parents);
    this.events = new EventLog(zk, this.paths.events);
  }

  /**
   * The create of a `/waiting` entry for a backoff of task `id` that ends at
   * `until`, when it ends later than `now`; none otherwise (most messages).
   */
  async waitingOps(id: string, until: number, now: number): Promise<ZkOp[]> {
    if (until <= now) return [];
    return [{ op: 'create', path: `${await this.waiting.tailBucket()}/${entryPrefix(until, id)}`, kind: 'sequential' }];
  }

  /**
   * The create of an `/expiry` entry for a message whose policy names a time to live's deadline; none for a
   * message without a policy (most), which costs nothing more.
   */
  async expiryOps(id: string, policy: string | null): Promise<ZkOp[]> {
    if (policy === null) return [];
    const expireAt = decodePolicy(policy)?.expireAt;
    if (expireAt === undefined) return [];
    return [
      { op: 'create', path: `${await this.expiring.tailBucket()}/${entryPrefix(expireAt, id)}`, kind: 'sequential' },
    ];
  }

  /**
   * The configuration as claims and finishes need it (paused, maxDeliveries,
   * deadLetterQueue), with the version of `conf` to check in their multis;
   * read again only after the data watch on `conf` fired (every configure
   * sets it), so a claim adds no round trip for it.
   */
  async confView(): Promise<ConfRead> {
    if (this.conf !== null && this.watchingConf) return this.conf;
    const arm = !this.watchingConf;
    this.watchingConf = true;
    const fired = (): void => {
      this.watchingConf = false;
      // A resume: idle workers look again.
      this.onChange();
    };
    try {
      this.conf = await readConf(this.zk, this.paths.conf, arm ? fired : undefined);
    } catch (error) {
      if (arm) this.watchingConf = false;
      throw error;
    }
    return this.conf;
  }

  /**
   * The configuration as the writers of events need it (read as confView
   * does); with events on, the queue's nodes are made first where an older
   * kvmq made the queue without `events`.
   */
  async eventsConfig(): Promise<QueueConfig> {
    const { config } = await this.confView();
    if (config.events) await this.ensure();
    return config;
  }

  /** The configuration view as last read, or null. Reads nothing. */
  peekConf(): ConfRead | null {
    return this.conf;
  }

  /** Whether the configuration view is kept by a live watch. */
  confTrusted(): boolean {
    return this.conf !== null && this.watchingConf;
  }

  /** A multi that checked `conf`'s version failed on it: read the configuration again. */
  staleConf(): void {
    this.watchingConf = false;
  }

  /**
   * The sub-queues and the dry-run counters, read only after a watch on
   * `/queue` (its children, or its data) fired. Watches are set by the reads
   * themselves, so no change between a read and its watch goes unseen; each
   * is set again only once it fired.
   */
  async queueView(): Promise<QueueView> {
    const view = this.view;
    if (view !== null && this.watchingData && this.watchingChildren && !this.subsStale) return view;
    // A watch already set (or being set by a read under way) is not set twice.
    const armData = !this.watchingData;
    const armChildren = !this.watchingChildren;
    const path = this.paths.queue;
    // New counters (a dry run) need a read, not a wake-up; a new sub-queue may hold messages for idle workers.
    const onData = (): void => {
      this.watchingData = false;
    };
    const onChildren = (): void => {
      this.watchingChildren = false;
      this.onChange();
    };
    const listing = view === null || armChildren || this.subsStale;
    // A staleView() while this listing is under way asks for another.
    if (listing) this.subsStale = false;
    const [node, made, children] = await Promise.all([
      view === null || armData ? this.read('watchingData', armData, onData, (w) => this.zk.get(path, w)) : null,
      // Sent before the listing (one session, in order): a sub-queue made after this read fails the check.
      listing ? this.zk.exists(this.paths.dir) : null,
      listing ? this.read('watchingChildren', armChildren, onChildren, (w) => this.zk.children(path, w)) : null,
    ]).catch((error: unknown) => {
      if (listing) this.subsStale = true;
      throw error;
    });
    if (children !== null && view !== null && view.subsMade !== (made?.version ?? null)) {
      // A sub-queue was made since: perhaps one a clear removed, made again, whose versions and buckets start over.
      for (const list of this.classes.values()) list.reset();
    }
    this.view = {
      subs: children === null ? (view?.subs ?? []) : children.children.map(parseSubNode).sort(byPriority),
      counters: node === null ? (view?.counters ?? { dryRuns: 0, eoqUntil: 0 }) : parseCounters(node.data),
      subsMade: children === null ? (view?.subsMade ?? null) : (made?.version ?? null),
    };
    return this.view;
  }

  /**
   * The check, for a claim's multi, that no sub-queue was made since `view` was read: null when its version is not
   * known.
   */
  subsUnchangedOp(view: QueueView): ZkOp | null {
    return view.subsMade === null ? null : { op: 'check', path: this.paths.dir, version: view.subsMade };
  }

  /** A claim's check found a sub-queue made since the view was read: list the sub-queues again. */
  staleView(): void {
    this.subsStale = true;
  }

  /** Sends a read, setting its watch when `arm`: the flag says it is set, unless the read fails or it fired. */
  private async read<T>(
    flag: 'watchingData' | 'watchingChildren',
    arm: boolean,
    onFire: () => void,
    request: (watch: (() => void) | undefined) => Promise<T>,
  ): Promise<T> {
    if (!arm) return request(undefined);
    this[flag] = true;
    try {
      return await request(onFire);
    } catch (error) {
      this[flag] = false;
      throw error;
    }
  }

  /** Whether the view's sub-queues are kept by a live watch (none made since it was read). */
  viewTrusted(): boolean {
    return this.view !== null && this.watchingChildren && !this.subsStale;
  }

  /** The view as last read, trusted or not. Reads nothing. */
  peekView(): QueueView | null {
    return this.view;
  }

  /** The session changed (its watches are gone) or the queue was cleared: read everything again. */
  invalidate(): void {
    this.watchingData = false;
    this.watchingChildren = false;
    this.watchingConf = false;
    this.taskBucketsListed = false;
    for (const list of this.classes.values()) list.invalidate();
  }

  /** The bucketed list (a sub-queue, or the done list) that a bucket path belongs to. */
  listOf(bucketPath: string): BucketedList | null {
    if (bucketPath.startsWith(`${this.paths.done}/`)) return this.done;
    if (bucketPath.startsWith(`${this.paths.failed}/`)) return this.failed;
    if (bucketPath.startsWith(`${this.paths.waiting}/`)) return this.waiting;
    if (bucketPath.startsWith(`${this.paths.expiry}/`)) return this.expiring;
    if (bucketPath.startsWith(`${this.paths.parents}/`)) return this.parents;
    if (!bucketPath.startsWith(`${this.paths.queue}/`)) return null;
    const key = parseSubNode(bucketPath.slice(this.paths.queue.length + 1).split('/')[0] ?? '');
    return this.sub(key.filterClass, key.priority, key.lifo);
  }

  /**
   * Creates of the tail buckets the sequential creates in `ops` write into,
   * where their writer moved on to a bucket not known to exist yet.
   */
  bucketCreates(ops: readonly ZkOp[]): ZkOp[] {
    const creates = new Map<string, ZkOp>();
    for (const op of ops) {
      if (op.op !== 'create' || op.kind !== 'sequential') continue;
      const bucket = op.path.slice(0, op.path.lastIndexOf('/'));
      const create = creates.has(bucket) ? null : this.listOf(bucket)?.tailCreate(bucket);
      if (create !== null && create !== undefined) creates.set(bucket, create);
    }
    return [...creates.values()];
  }

  /** After a multi with bucketCreates(), or one that found them made: the buckets exist. */
  noteBucketsMade(paths: readonly string[]): void {
    for (const path of paths) this.listOf(path)?.noteTailMade(path);
  }

  /** The sub-queue of one filter class and priority. */
  sub(filterClass: string, priority: number, lifo = false): BucketedList {
    const node = subNode(filterClass, priority, lifo);
    let list = this.classes.get(node);
    if (list === undefined) {
      // Making a sub-queue also sets the queue's dir (same data): claims check its version (see QueueView).
      const made: ZkOp = { op: 'set', path: this.paths.dir, data: Buffer.from(QUEUE_MARKER), version: -1 };
      list = new BucketedList(this.zk, this.paths.classDir(filterClass, priority, lifo), [made]);
      this.classes.set(node, list);
    }
    return list;
  }

  knowsTaskBucket(path: string): boolean {
    return this.taskBuckets.has(path);
  }

  async makeTaskBucket(path: string): Promise<void> {
    await this.zk.ensure(path);
    this.taskBuckets.add(path);
  }

  noteTaskBucket(path: string): void {
    this.taskBuckets.add(path);
  }

  /**
   * Lists `/tasks` once (4,096 names at most), so an enqueue knows which
   * task buckets to create in its own multi instead of one round trip each.
   */
  async listTaskBuckets(): Promise<void> {
    if (this.taskBucketsListed) return;
    try {
      const { children } = await this.zk.children(this.paths.tasks);
      for (const bucket of children) this.taskBuckets.add(`${this.paths.tasks}/${bucket}`);
      this.taskBucketsListed = true;
    } catch (error) {
      // No /tasks (deleted by hand): the enqueue's multi fails on it and makes it again.
      if (!isZkError(error, ZkCode.NoNode)) throw error;
    }
  }

  /** Some task bucket exists that this process did not know of: list them again before the next enqueue. */
  forgetTaskBuckets(): void {
    this.taskBucketsListed = false;
  }

  /** Forgets everything cached (after clear()). */
  reset(): void {
    for (const list of this.classes.values()) list.reset();
    this.done.reset();
    this.failed.reset();
    this.waiting.reset();
    this.expiring.reset();
    this.parents.reset();
    this.taskBuckets.clear();
    this.view = null;
    this.invalidate();
  }

  /** Makes the queue's skeleton unless it exists; refuses a dir that is not a kvmq queue. */
  ensure(): Promise<void> {
    this.ensured ??= this.create().catch((error: unknown) => {
      this.ensured = null;
      throw error;
    });
    return this.ensured;
  }

  /** True when the queue's dir exists (and is kvmq's); reads never create it. */
  async exists(): Promise<boolean> {
    if (this.ensured !== null) {
      await this.ensured;
      return true;
    }
    try {
      const { data } = await this.zk.get(this.paths.dir);
      this.checkMarker(data);
      return true;
    } catch (error) {
      if (isZkError(error, ZkCode.NoNode)) return false;
      throw error;
    }
  }

  private async create(): Promise<void> {
    for (;;) {
      try {
        const { data } = await this.zk.get(this.paths.dir);
        this.checkMarker(data);
        // A queue made by an older run may lack nodes added since; make any missing.
        const { children } = await this.zk.children(this.paths.dir);
        for (const node of this.paths.skeleton().slice(1)) {
          const name = node.path.slice(this.paths.dir.length + 1);
          if (!name.includes('/') && !children.includes(name)) {
            await this.zk.ensure(node.path, Buffer.from(node.data));
          }
        }
        return;
      } catch (error) {
        if (!isZkError(error, ZkCode.NoNode)) throw error;
      }
      try {
        await this.zk.multi(
          this.paths.skeleton().map((n) => ({ op: 'create', path: n.path, data: Buffer.from(n.data) })),
        );
        return;
      } catch (error) {
        // Another process made it first: read it again.
        if (!isZkError(error, ZkCode.NodeExists)) throw error;
      }
    }
  }

  private checkMarker(data: Buffer): void {
    if (data.toString('utf8') !== QUEUE_MARKER) {
      throw new StoreLayoutError(
        `ZooKeeper node ${this.paths.dir} exists but is not a kvmq queue (its data is not kvmq's marker); ` +
          'use another queue name, or another dir in the store URL',
      );
    }
  }
}

export { classNode };

function byPriority(a: SubKey, b: SubKey): number {
  return a.priority - b.priority;
}
