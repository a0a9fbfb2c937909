/**
 * Reads for status(), queueStatus() and consumers(): a message's record (or a
 * plain producer's key not moved yet, which is `queued`), every record of a
 * queue page by page for the counts, and the consumer registrations with the
 * deliveries under each.
 */
import { StoreLayoutError } from '../../model/errors.js';
import { MESSAGE_STATES, type ConsumerInfo, type MessageState, type MessageStatus } from '../../model/types.js';
import { resultFromRecord } from '../../model/result.js';
import { prefixEnd, type KeyValue, type Kv, type Op } from './kv.js';
import { decodeRecord, stateEndsAt, stateOf, type MessageRecord } from './record.js';
import { consumerIdOf } from './transitions.js';
import { parseRegistration } from './registration.js';
import { producerPrefixes } from './dispatcher/snapshot.js';
import { timeKey, type QueueKeys } from './keys.js';
import { getMany } from './txn-batch.js';
import { countReads, sumCounts } from './counts.js';
import { recount } from './count-read.js';

const PAGE = 1000;

export async function messageStatus(kv: Kv, keys: QueueKeys, id: string): Promise<MessageStatus | null> {
  const producerKeys = producerPrefixes(keys)
    .filter((p) => !/\/(input|i)\/$/.test(p))
    .map((p) => p + id);
  const res = await kv.txn({
    compare: [],
    success: [keys.record(id), ...producerKeys].map((key): Op => ({ type: 'range', key })),
  });
  const [recordRes, ...producers] = res.responses;
  const recordKv = recordRes?.type === 'range' ? recordRes.kvs[0] : undefined;
  const now = Date.now();
  if (recordKv !== undefined) {
    const record = readRecord(recordKv);
    // A staged flow's message is not there yet (flow-staging.ts).
    return record.phase === 'staged' ? null : statusOf(keys, id, record, now);
  }
  const waiting = producers.some((p) => p.type === 'range' && p.kvs.length > 0);
  if (!waiting) return null;
  return {
    queue: keys.queue,
    id,
    state: 'queued',
    attempt: 0,
    outcome: null,
    lastError: null,
    enqueuedAt: now,
    updatedAt: now,
    consumer: null,
    until: null,
  };
}

/** A record kvmq wrote, or a StoreLayoutError. */
export function readRecord(kv: KeyValue): MessageRecord {
  const r = decodeRecord(kv.value);
  if (r === null) throw new StoreLayoutError(`${kv.key} holds data kvmq did not write; remove it`);
  return r;
}

/** A message's status from its record, as of `now`. */
export function statusOf(keys: QueueKeys, id: string, r: MessageRecord, now: number, withResult = true): MessageStatus {
  const state = stateOf(r, now);
  const consumer = state === 'locked' || state === 'locked-with-requeue' ? consumerIdOf(r.consumer) : null;
  return {
    queue: keys.queue,
    id,
    state,
    attempt: r.attempt,
    outcome: r.outcome,
    lastError: r.error,
    enqueuedAt: r.enqueuedAt,
    updatedAt: r.updatedAt,
    consumer,
    until: stateEndsAt(r, now),
    ...(withResult ? resultFromRecord(r) : {}),
  };
}

/**
 * Counts per state at one revision, never walking the backlog or the finished messages: how many are live
 * (pending or locked), done, failed and stuck from the counts kept with every change (counts.ts: a base and
 * the writers' slots); of those, the done ones still refusing duplicates (a count-only range of the refuse
 * index from now on), the entries of the backoff index still in their backoff (their value says which are
 * requeues), the unmoved producer keys (counted), and the records of the deliveries (locks: at most what the
 * consumers hold), to split locked, locked-with-requeue and expired locks (queued). One Txn carries them all;
 * a queue never counted is recounted once (count-read.ts).
 */
export async function stateCounts(kv: Kv, keys: QueueKeys): Promise<Record<MessageState, number>> {
  const counts = Object.fromEntries(MESSAGE_STATES.map((s) => [s, 0])) as Record<MessageState, number>;
  const now = Date.now();
  const count = (key: string, end: string): Op => ({ type: 'range', key, end, countOnly: true });
  const later = (index: string): string => timeKey(index, now + 1);
  const consumerPrefixes = [keys.prefix, keys.shortPrefix].flatMap((base) => [`${base}consumer/`, `${base}c/`]);
  const producers = producerPrefixes(keys);
  const res = await kv.txn({
    compare: [],
    success: [
      ...countReads(keys),
      count(later(keys.refuseIndex), prefixEnd(keys.refuseIndex)),
      { type: 'range', key: later(keys.backoffIndex), end: prefixEnd(keys.backoffIndex) },
      ...producers.map((p) => count(p, prefixEnd(p))),
      ...consumerPrefixes.map((p): Op => ({ type: 'range', key: p, end: prefixEnd(p), keysOnly: true })),
      // Flow parents waiting for their children (few: one per flow node with children).
      count(keys.waitingIndex, prefixEnd(keys.waitingIndex)),
    ],
  });
  const ranges = res.responses.map((r) => (r.type === 'range' ? r : { kvs: [], count: 0 }));
  const n = (i: number): number => ranges[i]?.count ?? 0;
  const totals = sumCounts(ranges[0]?.kvs ?? [], ranges[1]?.kvs ?? []) ?? (await recount(kv, keys, res.revision));
  const refusing = n(2);
  let backoffs = 0;
  for (const entry of ranges[3]?.kvs ?? []) {
    if (entry.value.toString('latin1') === 'r') counts['done-with-requeue'] += 1;
    else counts['queued-with-backoff'] += 1;
    backoffs += 1;
  }
  let waiting = 0;
  for (let i = 0; i < producers.length; i++) waiting += n(4 + i);
  const delivered: string[] = [];
  counts['waiting-children'] = ranges.at(-1)?.count ?? 0;
  for (const r of ranges.slice(4 + producers.length, -1)) {
    for (const item of r.kvs) {
      const parsed = keys.parse(item.key);
      if (parsed.kind === 'delivery') delivered.push(parsed.id);
    }
  }
  const records = await getMany(
    kv,
    delivered.map((id) => keys.record(id)),
    res.revision,
  );
  let locked = 0;
  for (const item of records) {
    const r = item === null ? null : decodeRecord(item.value);
    if (r?.phase !== 'locked') continue;
    const state = stateOf(r, now);
    if (state === 'locked' || state === 'locked-with-requeue') {
      counts[state] += 1;
      locked += 1;
    }
  }
  counts.queued = Math.max(0, totals.live - locked - backoffs) + Math.max(0, waiting - totals.stuck);
  counts['done-with-backoff'] = refusing;
  counts['done-awaiting-gc'] = Math.max(0, totals.done - refusing);
  counts.failed = totals.failed;
  return counts;
}

/** Messages waiting or held: the live ones (from the counts) plus unmoved producer keys (counted, not read). */
export async function queueSize(kv: Kv, keys: QueueKeys): Promise<number> {
  const producers = producerPrefixes(keys);
  const res = await kv.txn({
    compare: [],
    success: [
      ...countReads(keys),
      ...producers.map((p): Op => ({ type: 'range', key: p, end: prefixEnd(p), countOnly: true })),
    ],
  });
  const ranges = res.responses.map((r) => (r.type === 'range' ? r : { kvs: [], count: 0 }));
  const totals = sumCounts(ranges[0]?.kvs ?? [], ranges[1]?.kvs ?? []) ?? (await recount(kv, keys, res.revision));
  const waiting = ranges.slice(2).reduce((sum, r) => sum + r.count, 0);
  return totals.live + Math.max(0, waiting - totals.stuck);
}

export async function liveConsumers(kv: Kv, keys: QueueKeys): Promise<ConsumerInfo[]> {
  const prefixes = [keys.prefix, keys.shortPrefix].flatMap((base) => [`${base}consumer/`, `${base}c/`]);
  const consumers = new Map<string, { info: Omit<ConsumerInfo, 'holding'>; holding: string[] }>();
  const deliveries: { consumerKey: string; id: string }[] = [];
  for (const prefix of prefixes) {
    let from = prefix;
    for (;;) {
      const res = await kv.range({ key: from, end: prefixEnd(prefix), limit: PAGE });
      for (const item of res.kvs) {
        const parsed = keys.parse(item.key);
        if (parsed.kind === 'registration') {
          const reg = parseRegistration(item.value);
          consumers.set(parsed.consumerKey, {
            info: {
              id: parsed.consumer,
              host: reg.host,
              pid: reg.pid,
              startedAt: reg.startedAt,
              lastSeenAt: reg.seenAt,
            },
            holding: [],
          });
        } else if (parsed.kind === 'delivery') {
          deliveries.push({ consumerKey: parsed.consumerKey, id: parsed.id });
        }
      }
      const last = res.kvs.at(-1);
      if (!res.more || last === undefined) break;
      from = `${last.key}\0`;
    }
  }
  for (const d of deliveries) consumers.get(d.consumerKey)?.holding.push(d.id);
  return [...consumers.values()]
    .sort((a, b) => a.info.startedAt - b.info.startedAt)
    .map(({ info, holding }) => ({ ...info, holding }));
}
