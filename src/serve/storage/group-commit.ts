/**
 * Group commit, with the sync off the event loop: the write requests that
 * came in since the last batch are applied together in one SQLite
 * transaction, committed to the WAL without waiting for the disk, and
 * answered once an fdatasync of the WAL that started after their COMMIT has
 * returned. The sync runs on libuv's thread pool; while it is in flight the
 * event loop goes on reading and decoding requests, and the writes that
 * arrive meanwhile gather and are committed together when it returns, to
 * share the next sync. (Committing them at once, several commits per sync,
 * measured slower: more commits, and more CPU taken from the clients.)
 *
 * A request that fails with an etcd error (a missing lease) fails alone:
 * appliers validate before they change anything. Any other error rolls the
 * batch back and the server reloads its in-memory state from the file.
 *
 * Reads see the file's state, which may hold the batch being synced: the
 * reply to a read waits for the sync that covers what it saw (`whenDurable`),
 * so no client ever hears of a write that a crash could still take back.
 */
import { Code, EtcdError } from '../errors.js';
import type { RevisionEvents } from '../mvcc/kvstore.js';
import type { Backend } from './backend.js';

/** What an applier may record while it runs inside a batch. */
export class Batch {
  readonly revisions: RevisionEvents[] = [];
  private readonly after: (() => void)[] = [];

  constructor(
    /** Requests in the batch. */
    readonly requests: number,
  ) {}

  record(events: RevisionEvents | null): void {
    if (events !== null) this.revisions.push(events);
  }

  /** Runs `fn` once the batch is durable (before the replies). */
  afterCommit(fn: () => void): void {
    this.after.push(fn);
  }

  runAfterCommit(): void {
    for (const fn of this.after) fn();
  }
}

export type Applier<T> = (batch: Batch) => T;

interface Pending {
  apply: Applier<unknown>;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/** A batch committed to the WAL, waiting for the sync that makes it durable. */
interface Committed {
  readonly seq: number;
  readonly batch: Batch;
  readonly items: Pending[];
  readonly outcomes: { ok: boolean; value: unknown }[];
}

export interface GroupCommitHooks {
  /** Runs last inside the transaction of every batch (to persist counters). */
  beforeCommit(batch: Batch): void;
  /** Runs once the batch is durable, before its replies, with its revisions in order. */
  committed(batch: Batch): void;
  /** The batch failed for a reason other than a request's own error; in-memory state must be reloaded. */
  failed(error: unknown): void;
  /** A sync failed: what was committed may not be on disk, and the server cannot go on. */
  fatal(error: unknown): void;
}

/** Requests applied in one batch at most, so one batch never holds the loop for long. */
const MAX_BATCH = 4096;

export class GroupCommit {
  private queue: Pending[] = [];
  private scheduled = false;
  private closed = false;
  /** Batches committed to the WAL, in order, not yet durable. */
  private unsynced: Committed[] = [];
  private syncing = false;
  private broken: unknown = null;
  /** Readers waiting for a sequence number to be durable. */
  private waiters: { seq: number; resolve: () => void; reject: (error: unknown) => void }[] = [];
  /** Commits so far (batches, and changes written outside them such as VACUUM). */
  private committedSeq = 0;
  /** Commits known to be on disk. */
  private durableSeq = 0;
  /** Batches committed so far. */
  batches = 0;
  /** Syncs done so far. */
  syncs = 0;
  /** Told each sync's duration in seconds (kvmq serve --metrics); null measures nothing. */
  onSync: ((seconds: number) => void) | null = null;

  constructor(
    private readonly backend: Backend,
    private readonly hooks: GroupCommitHooks,
  ) {}

  submit<T>(apply: Applier<T>): Promise<T> {
    if (this.closed) return Promise.reject(new EtcdError(Code.UNAVAILABLE, 'etcdserver: server stopped'));
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ apply, resolve: resolve as (value: unknown) => void, reject });
      this.schedule();
    });
  }

  /** The point a read taken now must wait for: pass it to `whenDurable`. */
  get mark(): number {
    return this.committedSeq;
  }

  /** Whether everything committed up to `mark` is on disk. */
  isDurable(mark: number): boolean {
    return this.durableSeq >= mark;
  }

  /** Resolves once everything committed up to `mark` is on disk. */
  whenDurable(mark: number): Promise<void> {
    if (this.broken !== null) return Promise.reject(this.failure(this.broken));
    if (this.durableSeq >= mark) return Promise.resolve();
    return new Promise((resolve, reject) => this.waiters.push({ seq: mark, resolve, reject }));
  }

  /** Resolves once everything committed so far is on disk. */
  settled(): Promise<void> {
    return this.whenDurable(this.committedSeq);
  }

  /** Counts a change written outside a batch (VACUUM): it is durable once the next sync returns. */
  committedOutside(): Promise<void> {
    this.committedSeq++;
    this.startSync();
    return this.settled();
  }

  private schedule(): void {
    // While a sync is in flight requests gather (decoded and checked, not applied); its end flushes them.
    if (this.scheduled || this.syncing || this.queue.length === 0) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  /** Applies and commits the queued requests as one batch; they are answered when a sync covers it. */
  private flush(): void {
    if (this.queue.length === 0) return;
    const items = this.queue.length > MAX_BATCH ? this.queue.splice(0, MAX_BATCH) : this.queue;
    if (items === this.queue) this.queue = [];
    if (this.broken !== null) {
      for (const item of items) item.reject(this.failure(this.broken));
      return;
    }
    const batch = new Batch(items.length);
    const outcomes: { ok: boolean; value: unknown }[] = [];
    try {
      this.backend.begin();
      for (const item of items) {
        try {
          outcomes.push({ ok: true, value: item.apply(batch) });
        } catch (error) {
          if (!(error instanceof EtcdError)) throw error;
          outcomes.push({ ok: false, value: error });
        }
      }
      this.hooks.beforeCommit(batch);
      this.backend.commit();
    } catch (error) {
      try {
        this.backend.rollback();
      } catch {
        // The rollback's error says less than the first one.
      }
      const failure = this.failure(error);
      for (const item of items) item.reject(failure);
      this.hooks.failed(error);
      this.schedule();
      return;
    }
    this.batches++;
    this.committedSeq++;
    this.unsynced.push({ seq: this.committedSeq, batch, items, outcomes });
    this.startSync();
    this.schedule();
  }

  /** Starts a sync of everything committed so far, unless one is in flight (it starts another when done). */
  private startSync(): void {
    if (this.syncing || this.broken !== null || this.durableSeq >= this.committedSeq) return;
    this.syncing = true;
    const target = this.committedSeq;
    const started = this.onSync === null ? 0 : performance.now();
    this.backend.syncWal((error) => {
      this.syncing = false;
      this.onSync?.((performance.now() - started) / 1000);
      if (error !== null) {
        this.breakDown(error);
        return;
      }
      this.syncs++;
      this.durableSeq = target;
      this.answer();
      this.startSync();
      this.schedule();
    });
  }

  /** Answers the batches and readers the last sync covered, in commit order. */
  private answer(): void {
    let done = 0;
    while (done < this.unsynced.length && (this.unsynced[done] as Committed).seq <= this.durableSeq) done++;
    const batches = this.unsynced.splice(0, done);
    for (const { batch, items, outcomes } of batches) {
      batch.runAfterCommit();
      this.hooks.committed(batch);
      for (let i = 0; i < items.length; i++) {
        const item = items[i] as Pending;
        const outcome = outcomes[i] as { ok: boolean; value: unknown };
        if (outcome.ok) item.resolve(outcome.value);
        else item.reject(outcome.value);
      }
    }
    if (this.waiters.length === 0) return;
    // Marks come in order mostly, not always (a reply may ask with a mark taken before an await).
    const waiting = this.waiters;
    this.waiters = waiting.filter((waiter) => waiter.seq > this.durableSeq);
    for (const waiter of waiting) if (waiter.seq <= this.durableSeq) waiter.resolve();
  }

  /** A failed sync: nothing committed since the last good one may be answered. */
  private breakDown(error: unknown): void {
    this.broken = error;
    const failure = this.failure(error);
    for (const { items } of this.unsynced) for (const item of items) item.reject(failure);
    this.unsynced = [];
    for (const waiter of this.waiters) waiter.reject(failure);
    this.waiters = [];
    for (const item of this.queue) item.reject(failure);
    this.queue = [];
    this.hooks.fatal(error);
  }

  private failure(error: unknown): EtcdError {
    const message = error instanceof Error ? error.message : String(error);
    return new EtcdError(Code.UNAVAILABLE, `etcdserver: storage failed: ${message}`);
  }

  /** Applies what is queued now and waits until it is on disk. */
  idle(): Promise<void> {
    this.flush();
    return this.settled();
  }

  /** Applies what is queued, waits until it is on disk, and refuses new writes. */
  async close(): Promise<void> {
    this.closed = true;
    while (this.queue.length > 0) this.flush();
    await this.settled().catch(() => undefined);
  }
}
