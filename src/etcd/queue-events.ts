/**
 * Queue events on etcd: one key per event under `/queue/{q}/kvmq/ev/`, put in
 * the same Txn as the transition it records (by kvmq's producers, consumers,
 * actions and the dispatcher). The key is `{at:13}/{writer}{seq}`: unique, and
 * in time order, which trimming by age and count walks. Events are read in
 * commit order: by mod revision, then by key among the events of one Txn. A
 * cursor is `{revision}` after the last event of a revision, else
 * `{revision}.{key}`: a reader that has passed revision r has seen every event
 * committed up to r, whatever time a slow writer put in its key, so nothing
 * is skipped or repeated.
 */
import { randomBytes } from 'node:crypto';
import { errorTail } from '../model/history.js';
import { QUEUE_EVENT_TYPES, type QueueEventType, type StoredEvent } from '../model/events.js';
import { timeKey, type QueueKeys } from './keys.js';
import { prefixEnd, type KeyValue, type Kv, type Op, type Watch } from './kv.js';
import type { EventPage } from '../store/contract.js';
import type { QueueConfig } from '../model/types.js';

/** This process's part of event keys, so that writers never collide. */
const WRITER = randomBytes(6).toString('base64url');
let sequence = 0;

// Events deleted per trimming Txn: with the put of the trimmed revision, within etcd's 128 ops.
const TRIM_PAGE = 120;
const MAX_TRIES = 20;
const RESUBSCRIBE_MS = 1000;
const CURSOR = /^(0|[1-9]\d{0,15})(?:\.(\d{13}\/[A-Za-z0-9_-]{1,40}))?$/;
// One Txn writes at most this many events (etcd's --max-txn-ops), which bounds the events of one revision.
const EVENTS_PER_TXN = 128;
const TYPES: ReadonlySet<string> = new Set(QUEUE_EVENT_TYPES);

export interface EventNote {
  readonly type: QueueEventType;
  readonly id: string;
  readonly attempt: number;
  readonly error?: string | null;
}

/** The puts of these events at `at`, or none while the queue's configuration has events off. */
export function eventOps(keys: QueueKeys, on: boolean, at: number, ...notes: EventNote[]): Op[] {
  if (!on) return [];
  return notes.map((note) => {
    // Padded, so that the events of one Txn sort in the order they were noted.
    const key = `${timeKey(keys.events, at)}/${WRITER}${(sequence++).toString(36).padStart(8, '0')}`;
    const error = note.error === undefined ? null : errorTail(note.error);
    const body = { t: note.type, id: note.id, a: note.attempt, ...(error === null ? {} : { e: error }) };
    return { type: 'put', key, value: Buffer.from(JSON.stringify(body), 'utf8') };
  });
}

function decodeEvent(keys: QueueKeys, item: KeyValue, cursor: string): StoredEvent | null {
  try {
    const raw = JSON.parse(item.value.toString('utf8')) as { t?: unknown; id?: unknown; a?: unknown; e?: unknown };
    if (typeof raw.t !== 'string' || !TYPES.has(raw.t) || typeof raw.id !== 'string' || typeof raw.a !== 'number')
      return null;
    return {
      type: raw.t as QueueEventType,
      id: raw.id,
      at: Number(item.key.slice(keys.events.length, keys.events.length + 13)),
      attempt: raw.a,
      ...(typeof raw.e === 'string' ? { error: raw.e } : {}),
      cursor,
    };
  } catch {
    return null;
  }
}

interface Cursor {
  readonly revision: number;
  /** The last event read within `revision` (its key after the events prefix); null: all of it was read. */
  readonly key: string | null;
}

function parseCursor(cursor: string): Cursor {
  const match = CURSOR.exec(cursor);
  if (match === null) {
    throw new TypeError(
      `events cursor '${cursor}' is not one the etcd store makes ('{revision}' or '{revision}.{event key}')`,
    );
  }
  return { revision: Number(match[1]), key: match[2] ?? null };
}

function byCommitOrder(a: KeyValue, b: KeyValue): number {
  return a.modRevision - b.modRevision || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
}

function trimmedRevision(item: KeyValue | undefined): number {
  const n = item === undefined ? 0 : Number(item.value.toString('utf8'));
  return Number.isSafeInteger(n) ? n : 0;
}

/**
 * Events after the cursor, oldest first, with the highest trimmed revision read at the same revision (one
 * Txn). etcd filters by revision on the server, so the reply is about one page (etcd 3.4 reads the kept
 * events' range to filter it). It asks for two Txns' worth more than the page: events beyond the last whole
 * revision in the reply are left for the next page, so a Txn's events are never split by a cut etcd made.
 */
export async function readEvents(kv: Kv, keys: QueueKeys, after: string | null, limit: number): Promise<EventPage> {
  const from = after === null ? null : parseCursor(after);
  const asked = limit + 2 * EVENTS_PER_TXN;
  const res = await kv.txn({
    compare: [],
    success: [
      {
        type: 'range',
        key: keys.events,
        end: prefixEnd(keys.events),
        limit: asked,
        byModRevision: 'ascend',
        ...(from === null ? {} : { minModRevision: from.key === null ? from.revision + 1 : from.revision }),
      },
      { type: 'range', key: keys.eventsTrimmed },
    ],
  });
  const [page, trimmed] = res.responses;
  let kvs = page?.type === 'range' ? [...page.kvs].sort(byCommitOrder) : [];
  const cut = page?.type === 'range' && (page.more || page.kvs.length >= asked);
  if (cut) {
    const partial = kvs.at(-1)?.modRevision;
    kvs = kvs.filter((item) => item.modRevision !== partial);
  }
  if (from?.key != null) {
    const passed = keys.events + from.key;
    kvs = kvs.filter((item) => item.modRevision > from.revision || item.key > passed);
  }
  const taken = kvs.slice(0, limit);
  const cursors = taken.map((item, i) =>
    kvs[i + 1]?.modRevision === item.modRevision
      ? `${item.modRevision}.${item.key.slice(keys.events.length)}`
      : String(item.modRevision),
  );
  const events = taken.flatMap((item, i) => decodeEvent(keys, item, cursors[i] ?? '') ?? []);
  const trimmedRev = trimmedRevision(trimmed?.type === 'range' ? trimmed.kvs[0] : undefined);
  // Within the cursor's revision the trimmed events may all be before it: then this is told once too often.
  const missed = from !== null && (trimmedRev > from.revision || (from.key !== null && trimmedRev === from.revision));
  // A reader told it missed events, with none left after them, reads on from past the trimmed ones.
  const none = missed ? String(trimmedRev) : (after ?? String(res.revision));
  return { events, missed, cursor: cursors.at(-1) ?? none };
}

/**
 * The cursor after the newest event (all of its revision), or the store's revision when there is none:
 * reading after it returns only what is written later.
 */
export async function eventsHead(kv: Kv, keys: QueueKeys): Promise<string> {
  const res = await kv.range({
    key: keys.events,
    end: prefixEnd(keys.events),
    limit: 1,
    keysOnly: true,
    byModRevision: 'descend',
  });
  return String(res.kvs[0]?.modRevision ?? res.revision);
}

/**
 * Deletes the oldest events past `eventsMaxCount` and those older than `eventsMaxAgeMs` (by the time in
 * their keys), a page per Txn that also raises the trimmed revision to the highest it deleted. Returns how many.
 */
export async function trimEvents(kv: Kv, keys: QueueKeys, config: QueueConfig, now: number): Promise<number> {
  const end = prefixEnd(keys.events);
  const { count } = await kv.range({ key: keys.events, end, countOnly: true });
  if (count === 0) return 0;
  let excess = count - config.eventsMaxCount;
  const cutoff = timeKey(keys.events, now - config.eventsMaxAgeMs);
  let trimmed = 0;
  for (;;) {
    const page = await kv.range({ key: keys.events, end, limit: TRIM_PAGE, keysOnly: true });
    const doomed: KeyValue[] = [];
    for (const item of page.kvs) {
      if (doomed.length < excess || item.key < cutoff) doomed.push(item);
      else break;
    }
    if (doomed.length === 0) return trimmed;
    await deleteTrimmed(kv, keys, doomed);
    excess -= doomed.length;
    trimmed += doomed.length;
    if (doomed.length < page.kvs.length || !page.more) return trimmed;
  }
}

async function deleteTrimmed(kv: Kv, keys: QueueKeys, doomed: readonly KeyValue[]): Promise<void> {
  const highest = Math.max(...doomed.map((d) => d.modRevision));
  for (let tries = 0; tries < MAX_TRIES; tries++) {
    const current = (await kv.range({ key: keys.eventsTrimmed })).kvs[0];
    const res = await kv.txn({
      compare: [
        current === undefined
          ? { key: keys.eventsTrimmed, target: 'version', result: '=', operand: 0 }
          : { key: keys.eventsTrimmed, target: 'mod', result: '=', operand: current.modRevision },
      ],
      success: [
        ...doomed.map((d): Op => ({ type: 'delete', key: d.key })),
        {
          type: 'put',
          key: keys.eventsTrimmed,
          value: Buffer.from(String(Math.max(trimmedRevision(current), highest)), 'utf8'),
        },
      ],
    });
    if (res.succeeded) return;
  }
  throw new Error(`kvmq: trimming the events of ${keys.queue} kept conflicting; the next GC tries again`);
}

interface Subscription {
  readonly listeners: Set<() => void>;
  watch: Watch | null;
  stopped: boolean;
}

/** One etcd watch on a queue's events per process, shared by its listeners, closed with the last of them. */
export class EventSubscriptions {
  private readonly byQueue = new Map<string, Subscription>();

  constructor(
    private readonly kv: Kv,
    private readonly keysOf: (queue: string) => QueueKeys,
  ) {}

  subscribe(queue: string, listener: () => void): () => void {
    let entry = this.byQueue.get(queue);
    if (entry === undefined) {
      const created: Subscription = { listeners: new Set(), watch: null, stopped: false };
      this.byQueue.set(queue, created);
      this.start(this.keysOf(queue), created);
      entry = created;
    }
    const subscription = entry;
    subscription.listeners.add(listener);
    return () => {
      subscription.listeners.delete(listener);
      if (subscription.listeners.size > 0 || this.byQueue.get(queue) !== subscription) return;
      this.byQueue.delete(queue);
      this.stop(subscription);
    };
  }

  close(): void {
    for (const entry of this.byQueue.values()) this.stop(entry);
    this.byQueue.clear();
  }

  /** Watches from the store's current revision, then tells the listeners once: what came before, they read. */
  private start(keys: QueueKeys, entry: Subscription): void {
    this.kv.range({ key: keys.eventsTrimmed }).then(
      (res) => {
        if (entry.stopped) return;
        entry.watch = this.kv.watch(
          { key: keys.events, end: prefixEnd(keys.events), startRevision: res.revision + 1 },
          {
            events: (events) => {
              if (events.some((e) => e.type === 'put')) this.tell(entry);
            },
            broken: () => {
              entry.watch = null;
              if (!entry.stopped) this.start(keys, entry);
            },
          },
        );
        this.tell(entry);
      },
      () => {
        if (!entry.stopped) setTimeout(() => this.start(keys, entry), RESUBSCRIBE_MS).unref();
      },
    );
  }

  private tell(entry: Subscription): void {
    if (entry.stopped) return;
    for (const listener of [...entry.listeners]) listener();
  }

  private stop(entry: Subscription): void {
    entry.stopped = true;
    void entry.watch?.cancel().catch(() => undefined);
    entry.watch = null;
  }
}
