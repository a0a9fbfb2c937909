/**
 * How queue events are written on etcd (queue-events.ts reads them): the events of one Txn are one key,
 * `/queue/{q}/kvmq/ev/{at:13}/{writer}{seq}.{n}` (n: how many it holds), value a JSON array of
 * `{"t":type,"id","a":attempt,"e":error}` (`e` also holds a progress value, or a completed event's result). A change in a batch carries its notes (ChangeEvents), and
 * txn-batch.ts puts the notes of a batch's changes as one key in its Txn.
 */
import { randomBytes } from 'node:crypto';
import { eventSlotText, type QueueEventType } from '../../model/events.js';
import { timeKey, type QueueKeys } from './keys.js';
import type { Op } from './kv.js';

/** This process's part of event keys, so that writers never collide. */
const WRITER = randomBytes(6).toString('base64url');
let sequence = 0;

export interface EventNote {
  readonly type: QueueEventType;
  readonly id: string;
  readonly attempt: number;
  readonly error?: string | null;
}

/** The events a change writes in its Txn, for batches that gather them (txn-batch.ts). */
export interface ChangeEvents {
  readonly keys: QueueKeys;
  readonly notes: readonly EventNote[];
}

/** The put of these events, one key, at `at`; none while the queue's configuration has events off (or none). */
export function eventOps(keys: QueueKeys, on: boolean, at: number, ...notes: EventNote[]): Op[] {
  if (!on || notes.length === 0) return [];
  // Padded, so that keys of one writer in one millisecond sort in the order they were made.
  const key = `${timeKey(keys.events, at)}/${WRITER}${(sequence++).toString(36).padStart(8, '0')}.${notes.length}`;
  const body = notes.map((note) => {
    const error = eventSlotText(note.type, note.error);
    return { t: note.type, id: note.id, a: note.attempt, ...(error === null ? {} : { e: error }) };
  });
  return [{ type: 'put', key, value: Buffer.from(JSON.stringify(body), 'utf8') }];
}

/** The notes of a change when events are on, for its `events` field (undefined: nothing to write). */
export function changeEvents(keys: QueueKeys, on: boolean, ...notes: EventNote[]): ChangeEvents | undefined {
  return on && notes.length > 0 ? { keys, notes } : undefined;
}

/** How many events an event key holds (from its name), and when they were written. */
export function eventKeyInfo(keys: QueueKeys, key: string): { count: number; at: number } {
  const dot = key.lastIndexOf('.');
  const count = Number(key.slice(dot + 1));
  return {
    count: Number.isSafeInteger(count) && count > 0 ? count : 1,
    at: Number(key.slice(keys.events.length, keys.events.length + 13)),
  };
}
