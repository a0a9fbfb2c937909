/**
 * The GC's sweep of pending messages whose time to live ended (EnqueueOptions.expireAfterMs): it reads the
 * expiry index (`/kvmq/expiry/{expireAt}/{id}`, written with a never-delivered record that has a deadline, see
 * transitions.ts indexEntries) up to now, and fails each message still pending at attempt 0 with the error
 * `expired`, its payload kept for a retry, or moves it to the queue's dead-letter queue, one Txn per message
 * guarded by its record's mod revision. The dispatcher sees the record change in its watch and drops it.
 */
import { EXPIRED_ERROR } from '../../model/policy.js';
import { countChange, DEAD_LETTERED } from './counts.js';
import { changeEvents, eventOps } from './event-ops.js';
import { parseTimeKey, timeKey, QueueKeys } from './keys.js';
import { decodeRecord, encodeRecord } from './record.js';
import { readConfig } from './queue-state.js';
import { deadLetterCompare, deadLetterOps, failedRecord, indexOps } from './transitions.js';
import { getMany, runBatch, type Change } from './txn-batch.js';
import { FlowEnds, settled } from './flow-ends.js';
import type { Kv, Op } from './kv.js';
import type { QueueConfig } from '../../model/types.js';

// Index entries read per page.
const PAGE = 50;

/** Fails the pending messages whose deadline has passed; returns how many. */
export async function expireWaiting(kv: Kv, keys: QueueKeys, config: QueueConfig): Promise<number> {
  const end = timeKey(keys.expiryIndex, Date.now() + 1);
  let expired = 0;
  let from = keys.expiryIndex;
  for (;;) {
    const page = await kv.range({ key: from, end, limit: PAGE, keysOnly: true });
    for (const item of page.kvs) {
      if (await expireOne(kv, keys, config, item.key)) expired += 1;
    }
    const last = page.kvs.at(-1);
    if (!page.more || last === undefined) return expired;
    from = `${last.key}\0`;
  }
}

/** One index entry: its message failed (true), or, when it no longer waits with that deadline, the entry gone. */
async function expireOne(kv: Kv, keys: QueueKeys, config: QueueConfig, entry: string): Promise<boolean> {
  const { id } = parseTimeKey(keys.expiryIndex, entry);
  const [recordKv] = await getMany(kv, [keys.record(id)]);
  const record = recordKv === null || recordKv === undefined ? null : decodeRecord(recordKv.value);
  const now = Date.now();
  const stale = record === null || record.phase !== 'pending' || record.attempt !== 0 || record.idx === null;
  if (stale || recordKv === null || recordKv === undefined) {
    await kv.txn({ compare: [], success: [{ type: 'delete', key: entry }] });
    return false;
  }
  const orderedKey = keys.ordered(record.idx, id);
  const [payloadKv] = await getMany(kv, [orderedKey]);
  const payload = payloadKv?.value ?? Buffer.alloc(0);
  const failed = settled(failedRecord(record, EXPIRED_ERROR, now));
  // A flow's child ends for its parent in the same Txn (flow-ends.ts).
  const ends = new FlowEnds(kv, keys.root);
  await ends.childEnded([keys.queue, id], record.flow, { error: EXPIRED_ERROR });
  const flow = ends.change();
  const compares = [
    { key: keys.record(id), target: 'mod' as const, result: '=' as const, operand: recordKv.modRevision },
    ...flow.compares,
  ];
  const events = changeEvents(keys, config.events, { type: 'failed', id, attempt: 0, error: EXPIRED_ERROR });
  const dlq = config.deadLetterQueue === null ? null : new QueueKeys(keys.root, config.deadLetterQueue);
  if (dlq !== null && record.nextEncoding === null) {
    const dlqEvents = (await readConfig(kv, dlq)).events;
    const moved: Change = {
      compares: [...compares, deadLetterCompare(dlq, id)],
      ops: [
        ...deadLetterOps(keys, dlq, id, record, failed, orderedKey, payload, now),
        ...eventOps(dlq, dlqEvents, now, { type: 'enqueued', id, attempt: 0 }),
        ...flow.ops,
      ],
      reads: [],
      events,
      counts: [...countChange(keys, record, null), ...countChange(dlq, null, DEAD_LETTERED), ...flow.counts],
    };
    if ((await runBatch(kv, [moved])).results[0]?.ok === true) return true;
    // The id is taken there (or the message changed): it fails here, as below, if it still waits.
  }
  const ops: Op[] = [
    { type: 'put', key: keys.record(id), value: encodeRecord(failed) },
    { type: 'delete', key: orderedKey },
    { type: 'put', key: keys.payload(id), value: payload },
    ...indexOps(keys, id, record, failed),
    ...flow.ops,
  ];
  const counts = [...countChange(keys, record, failed), ...flow.counts];
  const change: Change = { compares, ops, reads: [], events, counts };
  // A message delivered or changed meanwhile stays: the next GC looks again.
  return (await runBatch(kv, [change])).results[0]?.ok === true;
}
