/**
 * Queue events on etcd: the events of one Txn are one key under
 * `/queue/{q}/kvmq/ev/`, put in that Txn with the transitions they record (by
 * kvmq's producers, consumers, actions and the dispatcher; batches of changes
 * gather theirs into one key, txn-batch.ts). The key is
 * `{at:13}/{writer}{seq}.{n}`: unique, in time order (which trimming walks),
 * with the number of events it holds; the value is a JSON array of
 * `{"t":type,"id","a":attempt,"e":error}`. Events are read in commit order: by
 * mod revision, then by key and position among a revision's events. A cursor
 * is `{revision}` after the last event of a revision, else `{revision}.{read}`
 * (how many of that revision's events were read): a reader that has passed
 * revision r has seen every event committed up to r, whatever time a slow
 * writer put in its key, so nothing is skipped or repeated.
 */
import { QUEUE_EVENT_TYPES, type QueueEventType, type StoredEvent } from '../../model/events.js';
import type { QueueKeys } from './keys.js';
import { prefixEnd, unchangedSince, type KeyValue, type Kv, type Op, type Watch } from './kv.js';
import { getMany } from './txn-batch.js';
import { eventKeyInfo as keyInfo } from './event-ops.js';
import type { EventPage } from '../contract/contract.js';
import type { QueueConfig } from '../../model/types.js';

// Event keys deleted per trimming Txn: with the put of the trimmed revision, within etcd's 128 ops.
const TRIM_PAGE = 120;
// Keys read per range when counting or trimming.
const SCAN_PAGE = 1000;
const MAX_TRIES = 20;
const RESUBSCRIBE_MS = 1000;
const CURSOR = /^(0|[1-9]\d{0,15})(?:\.([1-9]\d{0,5}))?$/;
// One Txn has at most this many ops (etcd's --max-txn-ops), so at most this many event keys share a revision.
const KEYS_PER_TXN = 128;
const TYPES: ReadonlySet<string> = new Set(QUEUE_EVENT_TYPES);

/** The `count` events of a key (null where its value holds no valid one). */
function decodeEvents(keys: QueueKeys, item: KeyValue, count: number): (Omit<StoredEvent, 'cursor'> | null)[] {
  const { at } = keyInfo(keys, item.key);
  let raw: unknown;
  try {
    raw = JSON.parse(item.value.toString('utf8'));
  } catch {
    raw = null;
  }
  const list = Array.isArray(raw) ? (raw as unknown[]) : [];
  return Array.from({ length: count }, (_, i) => {
    const e = list[i] as { t?: unknown; id?: unknown; a?: unknown; e?: unknown } | null | undefined;
    if (typeof e !== 'object' || e === null) return null;
    if (typeof e.t !== 'string' || !TYPES.has(e.t) || typeof e.id !== 'string' || typeof e.a !== 'number') return null;
    return {
      type: e.t as QueueEventType,
      id: e.id,
      at,
      attempt: e.a,
      ...(typeof e.e === 'string' ? { error: e.e } : {}),
    };
  });
}

interface Cursor {
  readonly revision: number;
  /** Events of `revision` already read; null: all of them. */
  readonly read: number | null;
}

function parseCursor(cursor: string): Cursor {
  const match = CURSOR.exec(cursor);
  if (match === null) {
    throw new TypeError(
      `events cursor '${cursor}' is not one the etcd store makes ('{revision}' or '{revision}.{events read}')`,
    );
  }
  return { revision: Number(match[1]), read: match[2] === undefined ? null : Number(match[2]) };
}

function byCommitOrder(a: KeyValue, b: KeyValue): number {
  return a.modRevision - b.modRevision || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
}

function trimmedRevision(item: KeyValue | undefined): number {
  const n = item === undefined ? 0 : Number(item.value.toString('utf8'));
  return Number.isSafeInteger(n) ? n : 0;
}

/**
 * Events after the cursor, oldest first. One Txn reads the names of the event keys after the cursor's
 * revision (keys only, sorted by mod revision; etcd filters on the server, though etcd 3.4 walks the kept
 * events' range to do it) with the highest trimmed revision; their names say how many events each holds, so a
 * second read (at the same revision) fetches only the keys the page needs: O(page). It asks for 128 names
 * more than the page, the most one Txn can write: names beyond the last whole revision etcd returned are left
 * for the next page, so a revision's events are never split by a cut etcd made.
 */
export async function readEvents(kv: Kv, keys: QueueKeys, after: string | null, limit: number): Promise<EventPage> {
  const from = after === null ? null : parseCursor(after);
  const asked = limit + KEYS_PER_TXN;
  const res = await kv.txn({
    compare: [],
    success: [
      {
        type: 'range',
        key: keys.events,
        end: prefixEnd(keys.events),
        limit: asked,
        keysOnly: true,
        byModRevision: 'ascend',
        ...(from === null ? {} : { minModRevision: from.read === null ? from.revision + 1 : from.revision }),
      },
      { type: 'range', key: keys.eventsTrimmed },
    ],
  });
  const [page, trimmed] = res.responses;
  let names = page?.type === 'range' ? [...page.kvs].sort(byCommitOrder) : [];
  if (page?.type === 'range' && (page.more || page.kvs.length >= asked)) {
    const partial = names.at(-1)?.modRevision;
    names = names.filter((item) => item.modRevision !== partial);
  }
  // The positions of the page's events: key, index in it, and the cursor after it.
  const slots: { item: KeyValue; index: number; cursor: string }[] = [];
  const needed: KeyValue[] = [];
  for (let i = 0, seen = 0; i < names.length && slots.length < limit; i++) {
    const item = names[i];
    if (item === undefined) break;
    const sameAsBefore = names[i - 1]?.modRevision === item.modRevision;
    if (!sameAsBefore) seen = 0;
    const { count } = keyInfo(keys, item.key);
    const lastKeyOfRevision = names[i + 1]?.modRevision !== item.modRevision;
    let used = false;
    for (let index = 0; index < count && slots.length < limit; index++, seen++) {
      if (from !== null && from.read !== null && item.modRevision === from.revision && seen < from.read) continue;
      const last = lastKeyOfRevision && index === count - 1;
      slots.push({ item, index, cursor: last ? String(item.modRevision) : `${item.modRevision}.${seen + 1}` });
      used = true;
    }
    if (used) needed.push(item);
  }
  const values = await getMany(
    kv,
    needed.map((item) => item.key),
    res.revision,
  );
  const decoded = new Map<string, (Omit<StoredEvent, 'cursor'> | null)[]>();
  needed.forEach((item, i) => {
    const value = values[i];
    decoded.set(
      item.key,
      value === null || value === undefined ? [] : decodeEvents(keys, value, keyInfo(keys, item.key).count),
    );
  });
  const events = slots.flatMap(({ item, index, cursor }): StoredEvent[] => {
    const event = decoded.get(item.key)?.[index] ?? null;
    return event === null ? [] : [{ ...event, cursor }];
  });
  const trimmedRev = trimmedRevision(trimmed?.type === 'range' ? trimmed.kvs[0] : undefined);
  // Within the cursor's revision the trimmed events may all be before it: then this is told once too often.
  const missed = from !== null && (trimmedRev > from.revision || (from.read !== null && trimmedRev === from.revision));
  // A reader told it missed events, with none left after them, reads on from past the trimmed ones.
  const none = missed ? String(trimmedRev) : (after ?? String(res.revision));
  return { events, missed, cursor: slots.at(-1)?.cursor ?? none };
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

/** Every event key's name, oldest first by time (keys only, a page at a time). */
async function eventKeys(kv: Kv, keys: QueueKeys): Promise<KeyValue[]> {
  const end = prefixEnd(keys.events);
  const all: KeyValue[] = [];
  let from = keys.events;
  for (;;) {
    const page = await kv.range({ key: from, end, limit: SCAN_PAGE, keysOnly: true });
    all.push(...page.kvs);
    const last = page.kvs.at(-1);
    if (!page.more || last === undefined) return all;
    from = `${last.key}\0`;
  }
}

/**
 * Deletes the oldest event keys whose events are all past `eventsMaxCount` (the newest are kept), and those
 * older than `eventsMaxAgeMs` (by the time in their names), a page per Txn that also raises the trimmed
 * revision to the highest it deleted. Reads every event key's name (O(keys kept), at GC only). Returns how
 * many events went.
 */
export async function trimEvents(kv: Kv, keys: QueueKeys, config: QueueConfig, now: number): Promise<number> {
  const names = await eventKeys(kv, keys);
  if (names.length === 0) return 0;
  let excess = names.reduce((sum, item) => sum + keyInfo(keys, item.key).count, 0) - config.eventsMaxCount;
  const cutoff = now - config.eventsMaxAgeMs;
  const doomed: KeyValue[] = [];
  let trimmed = 0;
  for (const item of names) {
    const { count, at } = keyInfo(keys, item.key);
    if (count > excess && at >= cutoff) break;
    doomed.push(item);
    excess -= count;
    trimmed += count;
  }
  for (let i = 0; i < doomed.length; i += TRIM_PAGE) await deleteTrimmed(kv, keys, doomed.slice(i, i + TRIM_PAGE));
  return trimmed;
}

async function deleteTrimmed(kv: Kv, keys: QueueKeys, doomed: readonly KeyValue[]): Promise<void> {
  const highest = Math.max(...doomed.map((d) => d.modRevision));
  for (let tries = 0; tries < MAX_TRIES; tries++) {
    const current = (await kv.range({ key: keys.eventsTrimmed })).kvs[0];
    const res = await kv.txn({
      compare: [unchangedSince(keys.eventsTrimmed, current)],
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
