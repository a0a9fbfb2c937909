/**
 * GC: one at a time per queue (a lock in `/kvmq/gc`, taken with a compare,
 * lapsing after a while if its holder dies), at most once per configured
 * interval unless forced. It reads only the GC index entries
 * (`/kvmq/done/{finishedAt}/{id}`) older than the configured lifetime (or beyond the count kept), and
 * removes each finished message whose record still says so. Lapsed consumers
 * need no GC: their registrations live on leases.
 */
import { parseTimeKey, timeKey } from './keys.js';
import { expireWaiting } from './expiry.js';
import { tidyStagedFlows } from './flow-staging.js';
import { settleEnded } from './flow-ends.js';
import { decodeRecord } from './record.js';
import { indexOps } from './transitions.js';
import { getMany, runBatch } from './txn-batch.js';
import { trimEvents } from './queue-events.js';
import { countChange, type CountDelta } from './counts.js';
import { foldCounts } from './count-read.js';
import { prefixEnd, unchangedSince, type Kv, type Op } from './kv.js';
import type { QueueKeys } from './keys.js';
import type { GcResult, QueueConfig } from '../../model/types.js';

const GC_LOCK_MS = 60_000;
// Messages removed per Txn: up to six deletes each, within etcd's 128 ops.
const GC_PAGE = 20;

interface GcLock {
  readonly at: number;
  readonly lockUntil: number;
}

export async function runGc(kv: Kv, keys: QueueKeys, config: QueueConfig, force: boolean): Promise<GcResult> {
  const current = await kv.range({ key: keys.gcLock });
  const item = current.kvs[0];
  let lock: GcLock = { at: 0, lockUntil: 0 };
  if (item !== undefined) {
    try {
      lock = JSON.parse(item.value.toString('utf8')) as GcLock;
    } catch {
      // Not ours: taken over below.
    }
  }
  const now = Date.now();
  if (lock.lockUntil > now || (!force && lock.at + config.gcIntervalMs > now)) return { ran: false, removed: 0 };
  const took = await kv.txn({
    compare: [unchangedSince(keys.gcLock, item)],
    success: [{ type: 'put', key: keys.gcLock, value: lockValue({ at: now, lockUntil: now + GC_LOCK_MS }) }],
  });
  if (!took.succeeded) return { ran: false, removed: 0 };
  let removed = 0;
  try {
    // Expired messages first: one failed now is removed with the failed ones once past its lifetime.
    await expireWaiting(kv, keys, config);
    await tidyStagedFlows(kv, keys);
    await settleEnded(kv, keys);
    removed += await sweep(kv, keys, keys.doneIndex, config.gcLifetimeMs, config.keepDone);
    removed += await sweep(kv, keys, keys.failedIndex, config.failedLifetimeMs, config.keepFailed);
    // Events are trimmed even with events off: those left from before still age out.
    await trimEvents(kv, keys, config, now);
    await foldCounts(kv, keys, now);
  } finally {
    await kv.txn({
      compare: [],
      success: [{ type: 'put', key: keys.gcLock, value: lockValue({ at: now, lockUntil: 0 }) }],
    });
  }
  return { ran: true, removed };
}

/**
 * Removes the messages of an index (done or failed, by finish time) finished longer than `lifetimeMs` ago, and
 * with `keep`, those finished before the newest `keep` whatever their age: the index's first entries.
 */
async function sweep(kv: Kv, keys: QueueKeys, index: string, lifetimeMs: number, keep: number | null): Promise<number> {
  const cutoff = timeKey(index, Date.now() - lifetimeMs + 1);
  const all = prefixEnd(index);
  const beyond = keep === null ? 0 : (await kv.range({ key: index, end: all, countOnly: true })).count - keep;
  let removed = 0;
  let seen = 0;
  let from = index;
  for (;;) {
    const byCount = seen < beyond;
    const limit = byCount ? Math.min(GC_PAGE, beyond - seen) : GC_PAGE;
    const page = await kv.range({ key: from, end: byCount ? all : cutoff, limit, keysOnly: true });
    if (page.kvs.length === 0) break;
    seen += page.kvs.length;
    removed += await collect(
      kv,
      keys,
      index,
      byCount ? 0 : lifetimeMs,
      page.kvs.map((kv) => kv.key),
    );
    const last = page.kvs.at(-1);
    if (!page.more || last === undefined) break;
    from = `${last.key}\0`;
  }
  return removed;
}

function lockValue(lock: GcLock): Buffer {
  return Buffer.from(JSON.stringify(lock), 'utf8');
}

/** Removes the messages of these index entries that are finished, old enough and past their backoff. */
async function collect(
  kv: Kv,
  keys: QueueKeys,
  index: string,
  lifetimeMs: number,
  entries: readonly string[],
): Promise<number> {
  const phase = index === keys.failedIndex ? 'failed' : 'done';
  const ids = entries.map((key) => parseTimeKey(index, key).id);
  const at = entries.map((key) => parseTimeKey(index, key).time);
  const records = await getMany(
    kv,
    ids.map((id) => keys.record(id)),
  );
  const now = Date.now();
  const ops: Op[] = [];
  const compares: { key: string; rev: number }[] = [];
  const counts: CountDelta[] = [];
  let removed = 0;
  entries.forEach((entry, i) => {
    const id = ids[i] ?? '';
    const recordKv = records[i] ?? null;
    const record = recordKv === null ? null : decodeRecord(recordKv.value);
    const stale = record === null || record.phase !== phase || record.updatedAt !== at[i];
    if (stale || recordKv === null) {
      // The message ran again (or is gone): only the index entry goes.
      ops.push({ type: 'delete', key: entry });
      return;
    }
    if (record.updatedAt > now - lifetimeMs || (phase === 'done' && record.backoffUntil > now)) return;
    compares.push({ key: keys.record(id), rev: recordKv.modRevision });
    ops.push(
      { type: 'delete', key: entry },
      { type: 'delete', key: keys.record(id) },
      { type: 'delete', key: keys.payload(id) },
      { type: 'delete', key: keys.report(id) },
      ...indexOps(keys, id, record, null).filter((op) => op.key !== entry),
    );
    if (record.payloadKey !== null) ops.push({ type: 'delete', key: record.payloadKey });
    counts.push(...countChange(keys, record, null));
    removed += 1;
  });
  if (ops.length === 0) return 0;
  const { results } = await runBatch(kv, [
    {
      compares: compares.map((c) => ({ key: c.key, target: 'mod', result: '=', operand: c.rev })),
      ops,
      reads: [],
      counts,
    },
  ]);
  // A message that changed meanwhile stays; the next GC looks again.
  return results[0]?.ok === true ? removed : 0;
}
