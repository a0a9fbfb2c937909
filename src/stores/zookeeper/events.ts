/**
 * A queue's events: persistent sequential nodes `<queue>/events/e<n>_<seq>`,
 * one per multi that writes events (an enqueue of a batch, a finish that also
 * claims: one node however many messages), created in that multi while
 * `conf/events` is true. `<n>` is how many events the node holds, so that a
 * listing counts events without reading them; its data is a JSON array of
 * `[type, id, attempt, at]`, plus the error's text for `failed` and `retrying`
 * when there is one (a `progress` event's value, a `completed` event's result).
 *
 * ZooKeeper numbers a parent's sequential children from a counter of the
 * parent that grows in commit order and is never reused (it may skip ahead:
 * the parent's cversion also counts deletions, and a server that reloads the
 * tree numbers from it). A position is a node's number and how many of its
 * events come before it, `SSSSSSSSSS.KKKKK`; an event's cursor is the position
 * after it. `eventsHead` is the position after the newest node, or the mark
 * when none is left. Trimming deletes the oldest nodes and, in the same multi,
 * raises `trimmedTo` in the data of `events` (every node numbered below it may
 * have been trimmed), which is how a reader is told it `missed` some.
 *
 * A read lists the children of `events` once (every name, not a page) and
 * reads only the nodes of the page: the cost follows the nodes kept, at most
 * MAX_KEPT events (see docs/zookeeper.md).
 */
import { StoreLayoutError } from '../../model/errors.js';
import { eventSlotText, QUEUE_EVENT_TYPES, type QueueEventType, type StoredEvent } from '../../model/events.js';
import { isZkError, ZkCode, type ZkOp, type ZkSession } from './client.js';
import type { EventPage } from '../contract/contract.js';
import type { QueueConfig } from '../../model/types.js';

/**
 * Events kept at most, whatever `eventsMaxCount` says: a listing of `events`
 * (about 17 bytes a name, a node for each event at worst) must stay far below
 * jute.maxbuffer (1 MiB), trims between.
 */
export const MAX_KEPT = 30_000;
/** A process that wrote this many events since its last trim trims at its next write (sooner than GC). */
const TRIM_EVERY = 1000;
/**
 * Events read per request: nodes are read in groups of at most this many
 * events (a bigger node alone), so that a reply stays far below jute.maxbuffer
 * even with long ids and errors (under 1 KB an event).
 */
const EVENTS_PER_READ = 500;
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

/** A position: the node numbered `seq`, after `index` of its events. */
interface Position {
  readonly seq: number;
  readonly index: number;
}

export function cursorOf(p: Position): string {
  return `${p.seq.toString().padStart(10, '0')}.${p.index.toString().padStart(5, '0')}`;
}

function positionOf(cursor: string): Position {
  const match = /^(\d{10})\.(\d{5})$/.exec(cursor);
  if (match === null) {
    throw new TypeError(
      `event cursor '${cursor.slice(0, 40)}' is not one the ZooKeeper store makes (ten digits, a dot, five ` +
        'digits, as readEvents and eventsHead return them)',
    );
  }
  return { seq: Number(match[1]), index: Number(match[2]) };
}

/** An event node as its name says: its number and how many events it holds. */
interface EventNode {
  readonly seq: number;
  readonly count: number;
}

function nodeOf(name: string): EventNode | null {
  const match = /^e(\d+)_(\d{10})$/.exec(name);
  return match === null ? null : { seq: Number(match[2]), count: Number(match[1]) };
}

function nodeName(node: EventNode): string {
  return `e${node.count}_${node.seq.toString().padStart(10, '0')}`;
}

/** After the newest node listed; after the last trimmed one when none is left (numbers only grow). */
function headOf(listing: Listing): Position {
  return { seq: listing.nodes.reduce((head, node) => Math.max(head, node.seq + 1), listing.trimmedTo), index: 0 };
}

/** `nodes` cut into runs of at most EVENTS_PER_READ events (a bigger node alone). */
function groups(nodes: readonly EventNode[]): EventNode[][] {
  const out: EventNode[][] = [];
  let events = Infinity;
  for (const node of nodes) {
    if (events + node.count > EVENTS_PER_READ) {
      out.push([]);
      events = 0;
    }
    out[out.length - 1]?.push(node);
    events += node.count;
  }
  return out;
}

function ascending(nodes: EventNode[]): EventNode[] {
  return nodes.sort((a, b) => a.seq - b.seq);
}

interface Listing {
  /** In no order: ZooKeeper lists children unsorted. */
  readonly nodes: EventNode[];
  readonly trimmedTo: number;
  /** The data version of `events`, which every trim moves. */
  readonly version: number;
}

function parseMark(data: Buffer): number {
  try {
    const trimmedTo = (JSON.parse(data.toString('utf8')) as { trimmedTo?: unknown }).trimmedTo;
    return typeof trimmedTo === 'number' ? trimmedTo : 0;
  } catch {
    return 0;
  }
}

function encodeEvent(e: EventRecord): (string | number)[] {
  const fields: (string | number)[] = [e.type, e.id, e.attempt, e.at];
  // An error as the history keeps it (cut to its first line and its end); a progress value or result whole.
  const error = eventSlotText(e.type, e.error);
  if (error !== null) fields.push(error);
  return fields;
}

/** The events of a node, each without its cursor yet. */
function decodeNode(path: string, data: Buffer): Omit<StoredEvent, 'cursor'>[] {
  let list: unknown;
  try {
    list = JSON.parse(data.toString('utf8'));
  } catch {
    list = null;
  }
  if (!Array.isArray(list)) throw notAnEvent(path);
  return list.map((fields) => decodeEvent(path, fields));
}

function notAnEvent(path: string): StoreLayoutError {
  return new StoreLayoutError(`${path} does not hold kvmq queue events; is something else writing under this dir?`);
}

function decodeEvent(path: string, fields: unknown): Omit<StoredEvent, 'cursor'> {
  if (Array.isArray(fields)) {
    const [type, id, attempt, at, error] = fields as unknown[];
    if (
      QUEUE_EVENT_TYPES.includes(type as QueueEventType) &&
      typeof id === 'string' &&
      typeof attempt === 'number' &&
      typeof at === 'number'
    ) {
      const event = { type: type as QueueEventType, id, attempt, at };
      return typeof error === 'string' ? { ...event, error } : event;
    }
  }
  throw notAnEvent(path);
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
   * The create of the node holding a multi's events, none while the
   * configuration says events are off. Once this process wrote TRIM_EVERY
   * events, its next write starts a trim in the background.
   */
  ops(config: QueueConfig, events: readonly EventRecord[]): ZkOp[] {
    if (!config.events || events.length === 0) return [];
    // Counted as built, trimmed at the next write: by then the multis that passed the mark are in.
    if (this.written >= TRIM_EVERY && this.trimming === null) {
      this.written = 0;
      // Best effort: GC trims anyway, and a failure here (a closed store) changes nothing.
      this.trimming = this.trim(config, false)
        .catch(() => undefined)
        .finally(() => (this.trimming = null));
    }
    this.written += events.length;
    return [
      {
        op: 'create',
        path: `${this.path}/e${events.length}_`,
        data: Buffer.from(JSON.stringify(events.map(encodeEvent))),
        kind: 'sequential',
      },
    ];
  }

  /** Events after `after`'s position, oldest first, at most `limit`. */
  async read(after: string | null, limit: number): Promise<EventPage> {
    const from = after === null ? { seq: 0, index: 0 } : positionOf(after);
    for (let tries = 0; ; tries++) {
      const listing = await this.list();
      if (listing === null) return { events: [], missed: false, cursor: after ?? cursorOf({ seq: 0, index: 0 }) };
      // Only the nodes the page needs are read; filtered before sorting, so a live reader sorts a few.
      const wanted: EventNode[] = [];
      let room = limit;
      for (const node of ascending(listing.nodes.filter((n) => n.seq >= from.seq))) {
        if (room <= 0) break;
        wanted.push(node);
        room -= node.seq === from.seq ? Math.max(0, node.count - from.index) : node.count;
      }
      const reads = await this.readNodes(wanted);
      // Trimmed after the listing: read again, so that `missed` says so.
      if (reads.some((r) => r == null) && tries < TRIES) continue;
      const events: StoredEvent[] = [];
      wanted.forEach((node, k) => {
        const read = reads[k];
        if (read == null) return;
        const list = decodeNode(this.nodePath(node), read);
        list.forEach((event, index) => {
          if (events.length >= limit || (node.seq === from.seq && index < from.index)) return;
          const next = index + 1 < list.length ? { seq: node.seq, index: index + 1 } : { seq: node.seq + 1, index: 0 };
          events.push({ ...event, cursor: cursorOf(next) });
        });
      });
      const last = events[events.length - 1];
      const missed = after !== null && listing.trimmedTo > from.seq;
      // With nothing to return: a reader told it missed some goes on from the mark, not to be told again.
      const empty =
        after === null ? cursorOf(headOf(listing)) : missed ? cursorOf({ seq: listing.trimmedTo, index: 0 }) : after;
      return { events, missed, cursor: last?.cursor ?? empty };
    }
  }

  /** The position after the newest event (or after the last trimmed one): every later event is numbered past it. */
  async head(): Promise<string> {
    const listing = await this.list();
    return cursorOf(listing === null ? { seq: 0, index: 0 } : headOf(listing));
  }

  /**
   * Trims to the newest `eventsMaxCount` (at most MAX_KEPT) events, whole
   * nodes from the oldest, keeping a node while dropping it would leave fewer;
   * with `byAge` (GC) also older nodes whose newest event is past
   * `eventsMaxAgeMs`, stopping at the first that is not. A writer's trim is by
   * count only: its listing counts events from the names, reading none.
   * Returns how many events went.
   */
  trim(config: QueueConfig, byAge = true): Promise<number> {
    const expiredBefore = byAge ? Date.now() - config.eventsMaxAgeMs : -Infinity;
    return this.trimTo(Math.min(config.eventsMaxCount, MAX_KEPT), expiredBefore);
  }

  /** Removes every event (a clear), raising the mark so that a reader is told. */
  clear(): Promise<number> {
    return this.trimTo(0, -Infinity);
  }

  private async trimTo(keep: number, expiredBefore: number): Promise<number> {
    for (let tries = 0; tries < TRIES; tries++) {
      const listing = await this.list();
      if (listing === null) return 0;
      const nodes = ascending(listing.nodes);
      let total = nodes.reduce((sum, node) => sum + node.count, 0);
      const doomed: EventNode[] = [];
      for (const node of nodes) {
        if (total - node.count < keep) break;
        doomed.push(node);
        total -= node.count;
      }
      // Past the count, by age: read from the oldest kept (none to read when trimming by count only).
      for (const batch of expiredBefore > -Infinity ? groups(nodes.slice(doomed.length)) : []) {
        const reads = await this.readNodes(batch);
        const young = batch.findIndex((node, k) => {
          const read = reads[k];
          return read != null && decodeNode(this.nodePath(node), read).some((e) => e.at >= expiredBefore);
        });
        doomed.push(...(young < 0 ? batch : batch.slice(0, young)));
        if (young >= 0) break;
      }
      if (doomed.length === 0) return 0;
      if (await this.removeWithMark(doomed, listing.trimmedTo, listing.version)) {
        return doomed.reduce((sum, node) => sum + node.count, 0);
      }
      // Another trim (or a clear) got in first: look again.
    }
    return 0;
  }

  /** Removes `nodes` (ascending) in multis that each raise the mark, version-checked; false on a conflict. */
  private async removeWithMark(nodes: readonly EventNode[], mark: number, version: number): Promise<boolean> {
    let trimmedTo = mark;
    let at = version;
    for (let i = 0; i < nodes.length; i += REMOVES_PER_MULTI) {
      const chunk = nodes.slice(i, i + REMOVES_PER_MULTI);
      trimmedTo = Math.max(trimmedTo, (chunk[chunk.length - 1]?.seq ?? 0) + 1);
      const ops: ZkOp[] = [
        { op: 'set', path: this.path, data: Buffer.from(JSON.stringify({ trimmedTo })), version: at },
        ...chunk.map((node): ZkOp => ({ op: 'remove', path: this.nodePath(node), version: -1 })),
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
   * The event nodes, the mark and the data version of `events`, as of one
   * moment: read again when a trim came between; null when there is no
   * `events` node (a queue from before events, or none at all).
   */
  private async list(): Promise<Listing | null> {
    for (let tries = 0; ; tries++) {
      try {
        const [mark, listing] = await Promise.all([this.zk.get(this.path), this.zk.children(this.path)]);
        if (mark.stat.version !== listing.stat.version && tries < TRIES) continue;
        const nodes = listing.children.map(nodeOf).filter((node): node is EventNode => node !== null);
        return { nodes, trimmedTo: parseMark(mark.data), version: listing.stat.version };
      } catch (error) {
        if (isZkError(error, ZkCode.NoNode)) return null;
        throw error;
      }
    }
  }

  /** The data of `nodes`, in order (null for one gone), a group of EVENTS_PER_READ events per request. */
  private async readNodes(nodes: readonly EventNode[]): Promise<(Buffer | null)[]> {
    const out: (Buffer | null)[] = [];
    // One group at a time: reads asked in the same tick would travel as one request.
    for (const group of groups(nodes)) {
      const reads = await this.zk.getMany(group.map((node) => this.nodePath(node)));
      out.push(...reads.map((read) => read?.data ?? null));
    }
    return out;
  }

  private nodePath(node: EventNode): string {
    return `${this.path}/${nodeName(node)}`;
  }
}
