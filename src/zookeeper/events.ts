/**
 * A queue's events: persistent sequential nodes `<queue>/events/e<seq>`, each
 * created in the multi of the transition it describes, while `conf/events` is
 * true. Data: a JSON array `[type, id, attempt, at]`, plus the error's text for
 * `failed` and `retrying` when there is one.
 *
 * ZooKeeper numbers a parent's sequential children from a counter of the
 * parent that grows in commit order and is never reused (it may skip ahead:
 * the parent's cversion also counts deletions, and a server that reloads the
 * tree numbers from it). A cursor is the position after an event, its number
 * + 1, ten digits; `eventsHead` is the position after the newest event, or the
 * mark when none is left. Trimming deletes the oldest events and, in the same
 * multi, raises `trimmedTo` in the data of `events` (every position below it
 * may have been trimmed), which is how a reader is told it `missed` some.
 *
 * A read lists the children of `events` once (every name, not a page): the
 * cost follows the events kept, at most MAX_KEPT (see docs/zookeeper.md).
 */
import { StoreLayoutError } from '../errors.js';
import { errorTail } from '../model/history.js';
import { QUEUE_EVENT_TYPES, type QueueEventType, type StoredEvent } from '../model/events.js';
import { isZkError, ZkCode, type ZkOp, type ZkSession } from './client.js';
import type { EventPage } from '../store/contract.js';
import type { QueueConfig } from '../model/types.js';

/** The name of every event node before ZooKeeper's ten-digit sequence number. */
const PREFIX = 'e';
/**
 * Events kept at most, whatever `eventsMaxCount` says: a listing of `events`
 * (15 bytes a name) must stay far below jute.maxbuffer (1 MiB), trims between.
 */
export const MAX_KEPT = 40_000;
/** A process that wrote this many events since its last trim trims at its next write (sooner than GC). */
const TRIM_EVERY = 1000;
/** Event nodes read per request when a trim looks for the end of the expired ones. */
const AGE_READS = 64;
/** Removes per trim multi, with the mark. */
const REMOVES_PER_MULTI = 1000;
const TRIES = 5;

/** What a transition records; `at` is the writer's clock, as its state's times. */
export interface EventRecord {
  readonly type: QueueEventType;
  readonly id: string;
  readonly attempt: number;
  readonly at: number;
  readonly error?: string | null;
}

export function cursorOf(position: number): string {
  return position.toString().padStart(10, '0');
}

function positionOf(cursor: string): number {
  if (!/^\d{10}$/.test(cursor)) {
    throw new TypeError(
      `event cursor '${cursor.slice(0, 40)}' is not one the ZooKeeper store makes (ten digits, ` +
        'as readEvents and eventsHead return them)',
    );
  }
  return Number(cursor);
}

/** The sequence number of an event node's name, or null for a name that is not one. */
function seqOf(name: string): number | null {
  if (name.length !== PREFIX.length + 10 || !name.startsWith(PREFIX)) return null;
  const seq = Number(name.slice(PREFIX.length));
  return Number.isSafeInteger(seq) ? seq : null;
}

/** After the newest event listed; after the last trimmed one when none is left (numbers only grow). */
function headOf(listing: { seqs: readonly number[]; trimmedTo: number }): number {
  return listing.seqs.reduce((head, seq) => Math.max(head, seq + 1), listing.trimmedTo);
}

function ascending(seqs: number[]): number[] {
  return seqs.sort((a, b) => a - b);
}

function parseMark(data: Buffer): number {
  try {
    const trimmedTo = (JSON.parse(data.toString('utf8')) as { trimmedTo?: unknown }).trimmedTo;
    return typeof trimmedTo === 'number' ? trimmedTo : 0;
  } catch {
    return 0;
  }
}

function encodeEvent(e: EventRecord): Buffer {
  const fields: (string | number)[] = [e.type, e.id, e.attempt, e.at];
  // The text the history keeps: cut to its first line and its end.
  const error = errorTail(e.error ?? null);
  if (error !== null) fields.push(error);
  return Buffer.from(JSON.stringify(fields));
}

function decodeEvent(path: string, data: Buffer, cursor: string): StoredEvent {
  try {
    const [type, id, attempt, at, error] = JSON.parse(data.toString('utf8')) as unknown[];
    if (
      QUEUE_EVENT_TYPES.includes(type as QueueEventType) &&
      typeof id === 'string' &&
      typeof attempt === 'number' &&
      typeof at === 'number'
    ) {
      const event = { type: type as QueueEventType, id, attempt, at, cursor };
      return typeof error === 'string' ? { ...event, error } : event;
    }
  } catch {
    // reported below
  }
  throw new StoreLayoutError(`${path} does not hold a kvmq queue event; is something else writing under this dir?`);
}

/** The event log of one queue. */
export class EventLog {
  /** Events this process put in multis since it last trimmed. */
  private written = 0;
  private trimming: Promise<unknown> | null = null;

  constructor(
    private readonly zk: ZkSession,
    readonly path: string,
  ) {}

  /**
   * The creates of `events` for a multi, none while the configuration says
   * events are off. Once this process wrote TRIM_EVERY events, its next write
   * starts a trim in the background.
   */
  ops(config: QueueConfig, events: readonly EventRecord[]): ZkOp[] {
    if (!config.events || events.length === 0) return [];
    // Counted as built, trimmed at the next write: by then the multis that passed the mark are in.
    if (this.written >= TRIM_EVERY && this.trimming === null) {
      this.written = 0;
      // Best effort: GC trims anyway, and a failure here (a closed store) changes nothing.
      this.trimming = this.trimCount(config)
        .catch(() => undefined)
        .finally(() => (this.trimming = null));
    }
    this.written += events.length;
    return events.map((e) => ({
      op: 'create',
      path: `${this.path}/${PREFIX}`,
      data: encodeEvent(e),
      kind: 'sequential',
    }));
  }

  /** Events at or after `after`'s position, oldest first, at most `limit`. */
  async read(after: string | null, limit: number): Promise<EventPage> {
    const from = after === null ? 0 : positionOf(after);
    for (let tries = 0; ; tries++) {
      const listing = await this.list();
      if (listing === null) return { events: [], missed: false, cursor: after ?? cursorOf(0) };
      // Filtered before sorting: a live reader's page sorts a few numbers, not every event kept.
      const seqs = ascending(listing.seqs.filter((seq) => seq >= from)).slice(0, limit);
      const reads = await this.zk.getMany(seqs.map((seq) => this.nodePath(seq)));
      // Trimmed after the listing: read again, so that `missed` says so.
      if (reads.some((r) => r == null) && tries < TRIES) continue;
      const events: StoredEvent[] = [];
      seqs.forEach((seq, k) => {
        const read = reads[k];
        if (read != null) events.push(decodeEvent(this.nodePath(seq), read.data, cursorOf(seq + 1)));
      });
      const last = events[events.length - 1];
      const missed = after !== null && listing.trimmedTo > from;
      // With nothing to return: a reader told it missed some goes on from the mark, not to be told again.
      const empty = after === null ? cursorOf(headOf(listing)) : missed ? cursorOf(listing.trimmedTo) : after;
      return { events, missed, cursor: last?.cursor ?? empty };
    }
  }

  /** The position after the newest event (or after the last trimmed one): every later event is numbered past it. */
  async head(): Promise<string> {
    const listing = await this.list();
    return cursorOf(listing === null ? 0 : headOf(listing));
  }

  /**
   * Trims to `eventsMaxCount` (at most MAX_KEPT) newest events, and removes
   * older ones whose `at` is past `eventsMaxAgeMs`, oldest first, stopping at
   * the first that is not. Returns how many went.
   */
  trim(config: QueueConfig): Promise<number> {
    return this.trimTo(Math.min(config.eventsMaxCount, MAX_KEPT), Date.now() - config.eventsMaxAgeMs);
  }

  /**
   * A writer's trim, by count only (age is GC's): one `exists` tells whether
   * the queue holds more than it keeps, and only then are events listed.
   */
  private async trimCount(config: QueueConfig): Promise<number> {
    const keep = Math.min(config.eventsMaxCount, MAX_KEPT);
    const stat = await this.zk.exists(this.path);
    return stat === null || stat.numChildren <= keep ? 0 : this.trimTo(keep, -Infinity);
  }

  /** Removes every event (a clear), raising the mark so that a reader is told. */
  clear(): Promise<number> {
    return this.trimTo(0, -Infinity);
  }

  private async trimTo(keep: number, expiredBefore: number): Promise<number> {
    for (let tries = 0; tries < TRIES; tries++) {
      const listing = await this.list();
      if (listing === null) return 0;
      const seqs = ascending(listing.seqs);
      const doomed = seqs.slice(0, Math.max(0, seqs.length - keep));
      // Past the count, by age: read from the oldest kept (none to read when trimming by count only).
      for (let i = doomed.length; expiredBefore > -Infinity && i < seqs.length; i += AGE_READS) {
        const batch = seqs.slice(i, i + AGE_READS);
        const reads = await this.zk.getMany(batch.map((seq) => this.nodePath(seq)));
        const young = batch.findIndex((seq, k) => {
          const read = reads[k];
          return read != null && decodeEvent(this.nodePath(seq), read.data, '').at >= expiredBefore;
        });
        doomed.push(...(young < 0 ? batch : batch.slice(0, young)));
        if (young >= 0) break;
      }
      if (doomed.length === 0) return 0;
      if (await this.removeWithMark(doomed, listing.trimmedTo, listing.version)) return doomed.length;
      // Another trim (or a clear) got in first: look again.
    }
    return 0;
  }

  /** Removes `seqs` (ascending) in multis that each raise the mark, version-checked; false on a conflict. */
  private async removeWithMark(seqs: readonly number[], mark: number, version: number): Promise<boolean> {
    let trimmedTo = mark;
    let at = version;
    for (let i = 0; i < seqs.length; i += REMOVES_PER_MULTI) {
      const chunk = seqs.slice(i, i + REMOVES_PER_MULTI);
      trimmedTo = Math.max(trimmedTo, (chunk[chunk.length - 1] ?? 0) + 1);
      const ops: ZkOp[] = [
        { op: 'set', path: this.path, data: Buffer.from(JSON.stringify({ trimmedTo })), version: at },
        ...chunk.map((seq): ZkOp => ({ op: 'remove', path: this.nodePath(seq), version: -1 })),
      ];
      try {
        const [set] = await this.zk.multi(ops);
        at = set?.version ?? at + 1;
      } catch (error) {
        if (isZkError(error, ZkCode.BadVersion) || isZkError(error, ZkCode.NoNode)) return false;
        throw error;
      }
    }
    return true;
  }

  /**
   * The event numbers (in no order: ZooKeeper lists children unsorted), the
   * mark and the data version of `events`, as of one moment: read again when a
   * trim came between; null when there is no `events` node (a queue from
   * before events, or none at all).
   */
  private async list(): Promise<{ seqs: number[]; trimmedTo: number; version: number } | null> {
    for (let tries = 0; ; tries++) {
      try {
        const [mark, listing] = await Promise.all([this.zk.get(this.path), this.zk.children(this.path)]);
        if (mark.stat.version !== listing.stat.version && tries < TRIES) continue;
        const seqs = listing.children.map(seqOf).filter((seq): seq is number => seq !== null);
        return { seqs, trimmedTo: parseMark(mark.data), version: listing.stat.version };
      } catch (error) {
        if (isZkError(error, ZkCode.NoNode)) return null;
        throw error;
      }
    }
  }

  private nodePath(seq: number): string {
    return `${this.path}/${PREFIX}${cursorOf(seq)}`;
  }
}
