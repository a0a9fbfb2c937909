/**
 * A queue's schedules on etcd: `/queue/{q}/kvmq/sched/{name}`, value `{"body", "nextAt"}`. Firing reads
 * the key, checks body and nextAt are the expected ones, plans each message's enqueue as `enqueue` would
 * (enqueue.ts planEnqueue) and commits them in one Txn that compares the key's mod revision and puts the
 * new nextAt: of processes firing one slot, one Txn wins; the others find the schedule changed (null).
 */
import { planEnqueue } from './enqueue.js';
import { prefixEnd, unchangedSince, type KeyValue, type Kv } from './kv.js';
import { pack, runBatch, type Change } from './txn-batch.js';
import type { QueueKeys } from './keys.js';
import type { NewMessage, StoredSchedule } from '../contract/contract.js';
import type { EnqueueResult } from '../../model/types.js';

// Tries of a firing against concurrent changes to its messages (not to the schedule: that ends it).
const MAX_TRIES = 10;

function encode(body: string, nextAt: number): Buffer {
  return Buffer.from(JSON.stringify({ body, nextAt }), 'utf8');
}

function decode(keys: QueueKeys, item: KeyValue): StoredSchedule | null {
  try {
    const raw = JSON.parse(item.value.toString('utf8')) as { body?: unknown; nextAt?: unknown };
    if (typeof raw.body !== 'string' || typeof raw.nextAt !== 'number') return null;
    return { name: item.key.slice(keys.schedules.length), body: raw.body, nextAt: raw.nextAt };
  } catch {
    return null;
  }
}

export async function putSchedule(kv: Kv, keys: QueueKeys, schedule: StoredSchedule): Promise<boolean> {
  const key = keys.schedule(schedule.name);
  const put = { type: 'put', key, value: encode(schedule.body, schedule.nextAt) } as const;
  const res = await kv.txn({ compare: [unchangedSince(key, undefined)], success: [put], failure: [put] });
  return res.succeeded;
}

/** Sorted by name: etcd returns keys in byte order. */
export async function listSchedules(kv: Kv, keys: QueueKeys): Promise<StoredSchedule[]> {
  const res = await kv.range({ key: keys.schedules, end: prefixEnd(keys.schedules) });
  return res.kvs.map((item) => decode(keys, item)).filter((s): s is StoredSchedule => s !== null);
}

export async function removeSchedule(kv: Kv, keys: QueueKeys, name: string): Promise<boolean> {
  const key = keys.schedule(name);
  const res = await kv.txn({
    compare: [{ key, target: 'version', result: '>', operand: 0 }],
    success: [{ type: 'delete', key }],
  });
  return res.succeeded;
}

/**
 * One Txn when the changes fit (up to ~40 messages); more are committed chunk by chunk, each chunk
 * comparing the schedule unchanged and the last one setting nextAt. A firing that stops between chunks
 * leaves the schedule as it was, and the next firing's slot ids (derived from the slots) refuse what the
 * earlier chunks enqueued: each slot is still enqueued once.
 */
export async function fireSchedule(
  kv: Kv,
  keys: QueueKeys,
  expected: StoredSchedule,
  nextAt: number,
  messages: readonly NewMessage[],
  events: boolean,
): Promise<EnqueueResult[] | null> {
  const key = keys.schedule(expected.name);
  for (let tries = 0; tries < MAX_TRIES; tries++) {
    const item = (await kv.range({ key })).kvs[0];
    const stored = item === undefined ? null : decode(keys, item);
    if (item === undefined || stored?.body !== expected.body || stored.nextAt !== expected.nextAt) return null;
    const planned: { change: Change; result: EnqueueResult }[] = [];
    for (const message of messages) planned.push(await planEnqueue(kv, keys, message, events));
    const guard: Change = {
      compares: [{ key, target: 'mod', result: '=', operand: item.modRevision }],
      ops: [],
      reads: [{ type: 'range', key }],
    };
    const setNext: Change = {
      compares: [],
      ops: [{ type: 'put', key, value: encode(expected.body, nextAt) }],
      reads: [],
    };
    const batches = pack([...planned.map((p) => p.change), setNext], guard);
    let complete = true;
    for (const batch of batches) {
      const { results, fixedReads } = await runBatch(kv, batch, guard);
      if (results[0]?.ok === true) continue;
      if (fixedReads[0]?.kvs[0]?.modRevision !== item.modRevision) return null;
      // A message changed under the plan: plan again (what was committed is refused or kept as is).
      complete = false;
      break;
    }
    if (complete) return planned.map((p) => p.result);
  }
  throw new Error(`kvmq: firing schedule ${expected.name} of ${keys.queue} kept conflicting; try again`);
}
