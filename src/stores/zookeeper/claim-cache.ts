/**
 * What claims of one store remember between calls: entries held (by other
 * consumers, or by this process), claims under way, reads of the tasks next in
 * line sent ahead of their claim, and per consumer what its last claim asked
 * and the messages claimed for it by its last finish (see handoff.ts).
 */
import { isZkError, ZkCode, type ZkSession } from './client.js';
import { decodeState, taskNodes, type Entry, type TaskState } from './layout.js';
import type { ClaimedMessage } from '../contract/contract.js';

/** A task's state, payload and metadata, read in that order on one session. */
export interface TaskRead {
  readonly state: TaskState;
  readonly version: number;
  readonly data: Buffer;
  readonly metadata: Buffer;
}

/** What a consumer's last claim asked: its next finish claims on the same terms. */
export interface ConsumerTerms {
  readonly accepts: ((filterClass: string) => boolean) | null;
  readonly lockMs: number;
  readonly epoch: number;
}

/** A message a finish claimed for its consumer, waiting for that consumer's next claim. */
export interface Handoff {
  readonly message: ClaimedMessage;
  readonly entryPath: string;
  /** The state before the claim: a handoff nobody collects is put back to it. */
  readonly previous: TaskState;
  readonly lockUntil: number;
  readonly epoch: number;
  /** When the finish claimed it. */
  readonly at: number;
}

interface CachedRead {
  readonly at: number;
  readonly read: Promise<TaskRead | null>;
  /** Set once the read is in (undefined while it is on its way). */
  value?: TaskRead | null;
}

// Reads sent ahead are trusted this long (a stale one only costs a failed multi).
const READ_FRESH_MS = 2000;
const MAX_CACHED_READS = 1024;
const MAX_LOCKED = 10_000;
const EMPTY_METADATA = Buffer.from('{}');

export class ClaimCache {
  /** Entry path -> when its lock ends: skipped until then (or until a watch says its claim went). */
  readonly lockedUntil = new Map<string, number>();
  /** Entries a claim or finish of this process is taking now. */
  readonly trying = new Set<string>();
  /** Entries whose pending task unexpectedly had a claim: read the claim before the next try. */
  readonly suspect = new Set<string>();
  /** Entries of a group found full: skipped until the group's watch fires (groups.ts). */
  readonly blocked = new Set<string>();
  /** Group node path -> its blocked entries. */
  private readonly groupBlocked = new Map<string, Set<string>>();
  /** Per queue, the configuration version the blocked entries were found at. */
  readonly blockedAt = new Map<string, number>();
  /** Group node paths with a child watch set now. */
  readonly groupWatches = new Set<string>();
  /** Entries of a group waiting for its rate (group-rates.ts) -> when the group's next start comes. */
  readonly rateSkips = new Map<string, number>();
  /** Per queue, when the first group whose messages wait for its rate may start one. */
  readonly groupRateWaits = new Map<string, number>();
  /** Per queue, the queue size the last full claim saw (for monitors, when a claim reads nothing). */
  readonly queueSizes = new Map<string, number>();
  private readonly reads = new Map<string, CachedRead>();
  private readonly terms = new Map<string, ConsumerTerms>();
  private readonly handoffs = new Map<string, Handoff[]>();
  private readonly pausedUntil = new Map<string, number>();

  /** The task behind `entry`, read now or taken from a read sent ahead. Null when it is gone. */
  read(zk: ZkSession, entry: Entry, taskPath: string): Promise<TaskRead | null> {
    const cached = this.fresh(entry.path);
    return cached === undefined ? this.start(zk, entry.path, taskPath) : cached.read;
  }

  /** A read sent ahead that is already in, or undefined. */
  settled(path: string): TaskRead | null | undefined {
    return this.fresh(path)?.value;
  }

  /** Sends the reads of entries likely claimed next, so their claim needs no read of its own. */
  readAhead(zk: ZkSession, entries: readonly { entry: Entry; taskPath: string }[]): void {
    for (const { entry, taskPath } of entries) {
      if (this.fresh(entry.path) === undefined) this.start(zk, entry.path, taskPath).catch(() => undefined);
    }
  }

  forgetRead(path: string): void {
    this.reads.delete(path);
  }

  /** This process finished the message of `path`: nothing about the entry is worth keeping. */
  forgetEntry(path: string): void {
    this.reads.delete(path);
    this.lockedUntil.delete(path);
    this.rateSkips.delete(path);
    this.suspect.delete(path);
  }

  /** Remembers what a consumer's claim asked (its finishes claim on the same terms). */
  noteTerms(queue: string, consumer: string, terms: ConsumerTerms): void {
    this.terms.set(key(queue, consumer), terms);
  }

  termsOf(queue: string, consumer: string): ConsumerTerms | undefined {
    return this.terms.get(key(queue, consumer));
  }

  handoffsOf(queue: string, consumer: string): Handoff[] {
    return this.handoffs.get(key(queue, consumer)) ?? [];
  }

  addHandoffs(queue: string, consumer: string, added: readonly Handoff[]): void {
    const list = [...(this.handoffs.get(key(queue, consumer)) ?? []), ...added];
    if (list.length === 0) this.handoffs.delete(key(queue, consumer));
    else this.handoffs.set(key(queue, consumer), list);
  }

  /** Takes up to `max` of the consumer's handoffs (all with max = Infinity). */
  takeHandoffs(queue: string, consumer: string, max: number): Handoff[] {
    const list = this.handoffs.get(key(queue, consumer)) ?? [];
    const taken = list.splice(0, max);
    if (list.length === 0) this.handoffs.delete(key(queue, consumer));
    return taken;
  }

  /** The consumer is gone (unregistered): forget its terms; its handoffs are taken by the caller. */
  forgetConsumer(queue: string, consumer: string): void {
    this.terms.delete(key(queue, consumer));
  }

  blockForGroup(groupPath: string, entryPath: string): void {
    let entries = this.groupBlocked.get(groupPath);
    if (entries === undefined) {
      entries = new Set();
      this.groupBlocked.set(groupPath, entries);
    }
    entries.add(entryPath);
    this.blocked.add(entryPath);
  }

  /** The group's count went down: its entries may be claimed again. True when some were blocked. */
  unblockGroup(groupPath: string): boolean {
    const entries = this.groupBlocked.get(groupPath);
    if (entries === undefined) return false;
    this.groupBlocked.delete(groupPath);
    for (const path of entries) this.blocked.delete(path);
    return true;
  }

  /**
   * The queue's configuration changed (groupConcurrency or groupRateLimit may have): every blocked entry, and
   * every entry waiting for its group's rate, is looked at again.
   */
  unblockAll(): void {
    this.groupBlocked.clear();
    this.blocked.clear();
    this.rateSkips.clear();
    this.groupRateWaits.clear();
  }

  /** An entry of a group waiting for its rate: skipped until `until`, or until the configuration changes. */
  skipForRate(path: string, until: number): void {
    this.rateSkips.set(path, until);
    if (this.rateSkips.size > MAX_LOCKED) {
      const now = Date.now();
      for (const [p, at] of this.rateSkips) if (at <= now) this.rateSkips.delete(p);
    }
  }

  /** Everything, after a new session: claims and watches of the old one are gone. */
  clear(): void {
    this.unblockAll();
    this.groupWatches.clear();
    this.reads.clear();
    this.lockedUntil.clear();
    this.suspect.clear();
    this.terms.clear();
    this.handoffs.clear();
    this.pausedUntil.clear();
  }

  /** Everything about one queue, after it was cleared. */
  clearQueue(queue: string): void {
    const dir = `/${queue}/`;
    for (const map of [this.reads, this.lockedUntil]) {
      for (const path of map.keys()) if (path.startsWith(dir)) map.delete(path);
    }
    for (const path of this.suspect) if (path.startsWith(dir)) this.suspect.delete(path);
    this.unblockAll();
    const prefix = key(queue, '');
    for (const map of [this.terms, this.handoffs, this.pausedUntil]) {
      for (const k of map.keys()) if (k.startsWith(prefix)) map.delete(k);
    }
  }

  /** Marks an entry held until `until` (by another consumer, or this process). */
  noteLocked(path: string, until: number): void {
    this.lockedUntil.set(path, until);
    if (this.lockedUntil.size > MAX_LOCKED) {
      // Entries of claims lost or taken over are never finished here: drop those whose lock ended.
      const now = Date.now();
      for (const [p, at] of this.lockedUntil) if (at <= now) this.lockedUntil.delete(p);
    }
  }

  /** A claim riding on a finish lost a race: the consumer's finishes claim nothing for a while. */
  pauseClaimAhead(queue: string, consumer: string, ms: number): void {
    this.pausedUntil.set(key(queue, consumer), Date.now() + ms);
  }

  claimAheadPaused(queue: string, consumer: string): boolean {
    return (this.pausedUntil.get(key(queue, consumer)) ?? 0) > Date.now();
  }

  private fresh(path: string): CachedRead | undefined {
    const cached = this.reads.get(path);
    return cached !== undefined && Date.now() - cached.at < READ_FRESH_MS ? cached : undefined;
  }

  private start(zk: ZkSession, path: string, taskPath: string): Promise<TaskRead | null> {
    const nodes = taskNodes(taskPath);
    // Asked in this order on one session, so data and metadata are at least as new as the state read.
    // Metadata is asked for only when the state says there is some (most messages have none).
    const read = zk
      .getMany([nodes.state, nodes.data])
      .then(async ([state, data]) => {
        if (state === null || state === undefined || data === null || data === undefined) return null;
        const decoded = decodeState(nodes.state, state.data);
        const metadata = decoded.hasMetadata === false ? EMPTY_METADATA : (await zk.get(nodes.metadata)).data;
        return { state: decoded, version: state.version, data: data.data, metadata };
      })
      .catch((error: unknown) => {
        if (isZkError(error, ZkCode.NoNode)) return null;
        throw error;
      });
    const cached: CachedRead = { at: Date.now(), read };
    this.reads.delete(path);
    this.reads.set(path, cached);
    if (this.reads.size > MAX_CACHED_READS) {
      const oldest = this.reads.keys().next().value;
      if (oldest !== undefined) this.reads.delete(oldest);
    }
    read.then(
      (value) => {
        cached.value = value;
      },
      () => {
        if (this.reads.get(path) === cached) this.reads.delete(path);
      },
    );
    return read;
  }
}

function key(queue: string, consumer: string): string {
  return `${queue}\u0000${consumer}`;
}
