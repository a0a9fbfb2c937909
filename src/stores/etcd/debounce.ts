/**
 * Debounce on etcd: `/queue/{q}/kvmq/debounce/{debounceId}` names the waiting message of a debounce id
 * (an index entry of that message's record while it is pending and never delivered, transitions.ts
 * indexEntries, so its delivery, removal or GC deletes it in the same Txn). An enqueue with a debounce id
 * reads it; when it names a message still waiting, one Txn guarded by that record's mod revision puts
 * the new payload at its ordered key and its record with the new encoding, metadata and ready time.
 * Otherwise the message is added as usual, guarded by the entry's mod revision so that of two enqueues
 * racing on one debounce id only one adds.
 */
import { encodeRecord, decodeRecord, type MessageRecord } from './record.js';
import { indexOps } from './transitions.js';
import { changeEvents } from './event-ops.js';
import type { Compare, Kv } from './kv.js';
import type { QueueKeys } from './keys.js';
import type { Change } from './txn-batch.js';
import type { NewMessage } from '../contract/contract.js';

/** What a debounce id's entry says now. */
export interface DebounceTarget {
  /** The entry's mod revision (0: none), compared by an add so a racing add fails. */
  readonly entryRev: number;
  /** The waiting message it names, when that message is still waiting. */
  readonly waiting: { readonly id: string; readonly record: MessageRecord; readonly rev: number } | null;
}

/** Reads the debounce entry and the record it names. */
export async function debounceTarget(kv: Kv, keys: QueueKeys, debounceId: string): Promise<DebounceTarget> {
  const entry = (await kv.range({ key: keys.debounce(debounceId) })).kvs[0];
  if (entry === undefined) return { entryRev: 0, waiting: null };
  const id = entry.value.toString('utf8');
  const item = (await kv.range({ key: keys.record(id) })).kvs[0];
  const record = item === undefined ? null : decodeRecord(item.value);
  const waiting =
    item !== undefined &&
    record?.phase === 'pending' &&
    record.attempt === 0 &&
    !record.requeue &&
    record.debounceId === debounceId &&
    record.idx !== null;
  return { entryRev: entry.modRevision, waiting: waiting ? { id, record, rev: item.modRevision } : null };
}

/** The compare an add of a debounced message carries: the entry is as read (absent: mod revision 0). */
export function debounceCompare(keys: QueueKeys, debounceId: string, entryRev: number): Compare {
  return { key: keys.debounce(debounceId), target: 'mod', result: '=', operand: entryRev };
}

/** The waiting message takes the new payload, encoding, metadata and ready time; id, class, priority, group stay. */
export function debounceChange(
  keys: QueueKeys,
  message: NewMessage,
  waiting: NonNullable<DebounceTarget['waiting']>,
  events: boolean,
  now: number,
): Change {
  const r = waiting.record;
  const next: MessageRecord = {
    ...r,
    encoding: message.encoding,
    metadata: message.metadata,
    readyAt: now + message.initialBackoffMs,
    updatedAt: now,
  };
  return {
    compares: [{ key: keys.record(waiting.id), target: 'mod', result: '=', operand: waiting.rev }],
    ops: [
      { type: 'put', key: keys.ordered(r.idx ?? '', waiting.id), value: Buffer.from(message.payload) },
      { type: 'put', key: keys.record(waiting.id), value: encodeRecord(next) },
      ...indexOps(keys, waiting.id, r, next),
    ],
    reads: [],
    events: changeEvents(keys, events, { type: 'enqueued', id: waiting.id, attempt: 0 }),
  };
}
