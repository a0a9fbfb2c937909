/**
 * Walking the ordered queue from its oldest key (list of `queued`, the oldest waiting message of the
 * metrics) without ranging over its whole rest: etcd 3.4 walks every key of a range, limit or not, so a
 * read of a million-message queue's first 200 keys walks a million. Instead the walk reads windows of idx
 * time (bounded ranges, at most 200 keys each, the window narrowing where keys are dense and widening where
 * they are sparse) from a hint, `/queue/{q}/kvmq/head`: the oldest ordered key a walk last found.
 *
 * The hint need not be exact. Keys older than it (a producer's clock behind, a key put back) are read first
 * from their own range, which costs nothing while there are none; a hint older than the queue's head costs
 * a few empty windows. Without a hint, the first walk ranges over the whole queue once and leaves one.
 */
import { IDX_DIGITS, idxAt, idxMs, type QueueKeys } from './keys.js';
import type { KeyValue, Kv } from './kv.js';

const CHUNK = 200;
const FIRST_SPAN_MS = 1;
const MAX_SPAN_MS = 24 * 3600_000;
// Keys a producer on a fast clock could have made ahead of ours.
const CLOCK_SKEW_MS = 60_000;
// The hint is rewritten when the head found is this much newer.
const HINT_STEP_MS = 1000;

export function headHintKey(keys: QueueKeys): string {
  return `${keys.prefix}kvmq/head`;
}

/** The idx time of an ordered key or a window's end; 0 when not in kvmq's idx format. */
function timeOf(keys: QueueKeys, key: string): number {
  const digits = key.slice(keys.prefix.length, keys.prefix.length + IDX_DIGITS);
  return /^\d+$/.test(digits) && digits.length === IDX_DIGITS ? idxMs(digits) : 0;
}

/** Chunks of ordered keys (keys only), oldest first, after `after` (an ordered key; null: from the head). */
export async function* walkOrdered(kv: Kv, keys: QueueKeys, after: string | null): AsyncGenerator<KeyValue[]> {
  let from = after === null ? keys.orderedStart : `${after}\0`;
  let first: string | null = null;
  let hint: string | null = null;
  if (after === null) {
    const read = await kv.range({ key: headHintKey(keys) });
    hint = read.kvs[0]?.value.toString('latin1') ?? null;
    if (hint !== null && hint > keys.orderedStart && hint < keys.orderedEnd) {
      // Keys older than the hint: normally none, so this range costs nothing.
      for await (const chunk of ranged(kv, keys.orderedStart, hint)) {
        if (first === null && chunk[0] !== undefined) {
          first = chunk[0].key;
          await moveHint(kv, keys, hint, first);
        }
        yield chunk;
      }
      from = hint;
    }
  }
  // No hint: the first read ranges over the whole queue (once: it leaves a hint), then windows go on.
  let wide = after === null && from === keys.orderedStart;
  let span = FIRST_SPAN_MS;
  for (;;) {
    const fromMs = timeOf(keys, from);
    const final = wide || fromMs === 0 || fromMs > Date.now() + CLOCK_SKEW_MS;
    wide = false;
    const end = final ? keys.orderedEnd : keys.prefix + idxAt(fromMs + span);
    const res = await kv.range({ key: from, end, limit: CHUNK, keysOnly: true });
    if (after === null && first === null && res.kvs[0] !== undefined) {
      first = res.kvs[0].key;
      await moveHint(kv, keys, hint, first);
    }
    yield [...res.kvs];
    const last = res.kvs.at(-1);
    if (res.more && last !== undefined) {
      from = `${last.key}\0`;
      if (res.count > 4 * CHUNK) span = Math.max(1, Math.floor(span / 2));
    } else if (final) {
      return;
    } else {
      from = end;
      if (res.kvs.length < CHUNK / 4) span = Math.min(MAX_SPAN_MS, span * 4);
    }
  }
}

/** All keys of [start, end), a chunk at a time. */
async function* ranged(kv: Kv, start: string, end: string): AsyncGenerator<KeyValue[]> {
  let from = start;
  for (;;) {
    const res = await kv.range({ key: from, end, limit: CHUNK, keysOnly: true });
    yield [...res.kvs];
    const last = res.kvs.at(-1);
    if (!res.more || last === undefined) return;
    from = `${last.key}\0`;
  }
}

/** Leaves the head found for the next walk, when it moved on (a plain put: any value is only a hint). */
async function moveHint(kv: Kv, keys: QueueKeys, hint: string | null, head: string): Promise<void> {
  const stale = hint === null || timeOf(keys, head) - timeOf(keys, hint) >= HINT_STEP_MS || head < hint;
  if (!stale || timeOf(keys, head) === 0) return;
  await kv.txn({ compare: [], success: [{ type: 'put', key: headHintKey(keys), value: Buffer.from(head, 'latin1') }] });
}
