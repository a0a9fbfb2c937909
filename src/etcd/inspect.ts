/**
 * Reads for status(), queueStatus() and consumers(): a message's record (or a
 * plain producer's key not moved yet, which is `queued`), every record of a
 * queue page by page for the counts, and the consumer registrations with the
 * deliveries under each.
 */
import { StoreLayoutError } from '../errors.js';
import { MESSAGE_STATES, type ConsumerInfo, type MessageState, type MessageStatus } from '../model/types.js';
import { prefixEnd, type Kv, type Op } from './kv.js';
import { decodeRecord, stateEndsAt, stateOf } from './record.js';
import { parseRegistration } from './registration.js';
import { producerPrefixes } from './dispatcher/snapshot.js';
import type { QueueKeys } from './keys.js';

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
    const r = decodeRecord(recordKv.value);
    if (r === null) throw new StoreLayoutError(`${recordKv.key} holds data kvmq did not write; remove it`);
    const state = stateOf(r, now);
    const consumer = state === 'locked' || state === 'locked-with-requeue' ? consumerId(r.consumer) : null;
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
    };
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

/** The consumer's id from its registration key (the last segment). */
function consumerId(key: string | null): string | null {
  if (key === null) return null;
  return key.slice(key.lastIndexOf('/') + 1);
}

export async function stateCounts(kv: Kv, keys: QueueKeys): Promise<Record<MessageState, number>> {
  const counts = Object.fromEntries(MESSAGE_STATES.map((s) => [s, 0])) as Record<MessageState, number>;
  const now = Date.now();
  const end = prefixEnd(keys.records);
  let from = keys.records;
  let revision: number | undefined;
  for (;;) {
    const res = await kv.range({ key: from, end, limit: PAGE, ...(revision === undefined ? {} : { revision }) });
    revision ??= res.revision;
    for (const item of res.kvs) {
      const r = decodeRecord(item.value);
      if (r !== null) counts[stateOf(r, now)] += 1;
    }
    const last = res.kvs.at(-1);
    if (!res.more || last === undefined) break;
    from = `${last.key}\0`;
  }
  // Plain producers' keys the dispatcher has not moved yet.
  const waiting = await kv.txn({
    compare: [],
    success: producerPrefixes(keys).map((p): Op => ({ type: 'range', key: p, end: prefixEnd(p), countOnly: true })),
  });
  for (const r of waiting.responses) if (r.type === 'range') counts.queued += r.count;
  return counts;
}

/** Messages waiting or held: the ordered queue plus unmoved producer keys (counted, not read). */
export async function queueSize(kv: Kv, keys: QueueKeys): Promise<number> {
  const ranges: Op[] = [
    { type: 'range', key: keys.orderedStart, end: keys.orderedEnd, countOnly: true },
    ...producerPrefixes(keys).map((p): Op => ({ type: 'range', key: p, end: prefixEnd(p), countOnly: true })),
  ];
  const res = await kv.txn({ compare: [], success: ranges });
  return res.responses.reduce((n, r) => n + (r.type === 'range' ? r.count : 0), 0);
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
