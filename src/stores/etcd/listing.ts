/**
 * list() and inspect(): messages by state, from the key range that holds each
 * state, so a page costs the entries it walks, not the queue:
 *
 * - queued: the ordered queue (pending and locked messages, by idx), keeping
 *   those whose record reads queued (an expired lock does too), in windows of idx time (ordered-walk.ts);
 * - queued-with-backoff, done-with-requeue: the backoff index from now on (by the backoff's end);
 * - locked, locked-with-requeue: the consumers' deliveries (at most what they hold), by lock end;
 * - done-awaiting-gc, done-with-backoff: the done index (by finish time);
 * - failed: the failed index (by failure time);
 * - waiting-children: the waiting index (flow parents, by enqueue time).
 *
 * The cursor is the state and the last key walked. Each listed status comes
 * from the record read after the index, so it is what status() says.
 */
import { decodeReport } from '../contract/report-codec.js';
import { parseTimeKey, timeKey, type QueueKeys } from './keys.js';
import { prefixEnd, type KeyValue, type Kv } from './kv.js';
import { decodeRecord, stateOf, type MessageRecord } from './record.js';
import { readRecord, statusOf } from './inspect.js';
import { getMany } from './txn-batch.js';
import { walkOrdered } from './ordered-walk.js';
import { parseFilterClass } from '../../model/filters.js';
import { makeCursor, readCursor, type ListQuery } from '../../model/list.js';
import type { StoredContent, StoredDetails, StoredListing, StoredPage } from '../contract/contract.js';
import type { MessageState } from '../../model/types.js';

// Index entries read per round while filling a page.
const CHUNK = 200;
// Lock ends beyond any real one, for plain consumers' locks (held while registered).
const NO_LOCK_END = 9_999_999_999_999;

interface Candidate {
  /** The position of the entry in its range (the cursor). */
  readonly key: string;
  readonly id: string;
}

/** Where a message's payload is: the ordered key while it runs, the kept payload once finished. */
export function payloadKeyOf(keys: QueueKeys, id: string, r: MessageRecord): string | null {
  if ((r.phase === 'pending' || r.phase === 'locked') && r.idx !== null) return keys.ordered(r.idx, id);
  if (r.phase === 'failed') return r.payloadKey ?? keys.payload(id);
  return keys.payload(id);
}

function content(r: MessageRecord, payload: KeyValue | null): StoredContent {
  const filters = parseFilterClass(r.filterClass);
  // A success with no backoff keeps no payload: it reads as empty bytes.
  if (payload === null) return { payload: Buffer.alloc(0), encoding: 'bytes', metadata: r.metadata, filters };
  return { payload: payload.value, encoding: r.encoding, metadata: r.metadata, filters };
}

/** The entries of one state's range after `after`, a chunk at a time. */
async function* entries(
  kv: Kv,
  keys: QueueKeys,
  state: MessageState,
  after: string | null,
): AsyncGenerator<Candidate[]> {
  if (state === 'locked' || state === 'locked-with-requeue') {
    yield await lockEntries(kv, keys, after);
    return;
  }
  if (state === 'queued') {
    for await (const chunk of walkOrdered(kv, keys, after)) {
      yield chunk.flatMap((item) => {
        const parsed = keys.parse(item.key);
        return parsed.kind === 'ordered' ? [{ key: item.key, id: parsed.id }] : [];
      });
    }
    return;
  }
  const index =
    state === 'failed'
      ? keys.failedIndex
      : state === 'waiting-children'
        ? keys.waitingIndex
        : state === 'queued-with-backoff' || state === 'done-with-requeue'
          ? keys.backoffIndex
          : keys.doneIndex;
  const start = index === keys.backoffIndex ? timeKey(index, Date.now() + 1) : index;
  const end = prefixEnd(index);
  const idOf = (key: string): string | null => parseTimeKey(index, key).id;
  let from = after === null || after < start ? start : `${after}\0`;
  for (;;) {
    const res = await kv.range({ key: from, end, limit: CHUNK, keysOnly: true });
    const chunk: Candidate[] = [];
    for (const item of res.kvs) {
      const id = idOf(item.key);
      if (id !== null) chunk.push({ key: item.key, id });
    }
    yield chunk;
    const last = res.kvs.at(-1);
    if (!res.more || last === undefined) return;
    from = `${last.key}\0`;
  }
}

/** Held messages, by lock end: the deliveries under every registration (locks are few: what consumers hold). */
async function lockEntries(kv: Kv, keys: QueueKeys, after: string | null): Promise<Candidate[]> {
  const prefixes = [keys.prefix, keys.shortPrefix].flatMap((base) => [`${base}consumer/`, `${base}c/`]);
  const res = await kv.txn({
    compare: [],
    success: prefixes.map((p) => ({ type: 'range' as const, key: p, end: prefixEnd(p), keysOnly: true })),
  });
  const ids: string[] = [];
  for (const r of res.responses) {
    if (r.type !== 'range') continue;
    for (const item of r.kvs) {
      const parsed = keys.parse(item.key);
      if (parsed.kind === 'delivery') ids.push(parsed.id);
    }
  }
  const records = await getMany(
    kv,
    ids.map((id) => keys.record(id)),
  );
  const found: Candidate[] = [];
  ids.forEach((id, i) => {
    const item = records[i];
    const r = item === null || item === undefined ? null : decodeRecord(item.value);
    if (r?.phase !== 'locked') return;
    const key = `${timeKey('', r.lockUntil ?? NO_LOCK_END)}/${id}`;
    if (after === null || key > after) found.push({ key, id });
  });
  return found.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

export async function listMessages(kv: Kv, keys: QueueKeys, query: ListQuery): Promise<StoredPage> {
  const position = readCursor(query, 2);
  let first = 0;
  let after: string | null = null;
  if (position !== null) {
    first = query.states.indexOf(position[0] as MessageState);
    if (first < 0) throw new TypeError('cursor is not one a previous page of this listing returned');
    after = position[1] ?? null;
  }
  const messages: StoredListing[] = [];
  for (let s = first; s < query.states.length; s++) {
    const state = query.states[s];
    if (state === undefined) break;
    for await (const chunk of entries(kv, keys, state, s === first ? after : null)) {
      const records = await getMany(
        kv,
        chunk.map((c) => keys.record(c.id)),
      );
      const now = Date.now();
      const wanted: { c: Candidate; r: MessageRecord }[] = [];
      for (let i = 0; i < chunk.length && messages.length + wanted.length < query.limit; i++) {
        const c = chunk[i];
        const item = records[i];
        if (c === undefined || item === null || item === undefined) continue;
        const r = decodeRecord(item.value);
        if (r === null || stateOf(r, now) !== state) continue;
        if (query.outcome !== null && r.outcome !== query.outcome) continue;
        wanted.push({ c, r });
      }
      const payloads = query.payload
        ? await getMany(
            kv,
            wanted.map(({ c, r }) => payloadKeyOf(keys, c.id, r) ?? ''),
          )
        : [];
      wanted.forEach(({ c, r }, i) => {
        messages.push({
          status: statusOf(keys, c.id, r, now, query.payload),
          content: query.payload ? content(r, payloads[i] ?? null) : null,
        });
      });
      const last = wanted.at(-1);
      if (messages.length >= query.limit && last !== undefined) {
        return { messages, cursor: makeCursor(query, [state, last.c.key]) };
      }
    }
  }
  return { messages, cursor: null };
}

export async function inspectMessage(kv: Kv, keys: QueueKeys, id: string): Promise<StoredDetails | null> {
  const res = await kv.range({ key: keys.record(id) });
  const item = res.kvs[0];
  if (item === undefined) return null;
  const r = readRecord(item);
  // A staged flow's message is not there yet (flow-staging.ts).
  if (r.phase === 'staged') return null;
  const where = payloadKeyOf(keys, id, r);
  const [payload, report] = await Promise.all([
    where === null ? null : kv.range({ key: where }).then((read) => read.kvs[0] ?? null),
    kv.range({ key: keys.report(id) }),
  ]);
  return {
    status: statusOf(keys, id, r, Date.now()),
    content: content(r, payload),
    policy: r.policy,
    history: r.history,
    priority: r.priority,
    group: r.group,
    report: decodeReport(report.kvs[0]?.value),
  };
}
