/**
 * Turns (takeTurn): `/queue/{q}/kvmq/turn/{name}` holds when the last turn was taken, on the taker's clock.
 * A caller reads it and, when `everyMs` has passed, writes its own time in a Txn comparing the key's mod
 * revision (or its absence) with what it read: of callers racing for one turn, one Txn wins.
 */
import { unchangedSince, type Kv } from './kv.js';
import type { QueueKeys } from './keys.js';

export async function takeTurn(kv: Kv, keys: QueueKeys, name: string, everyMs: number): Promise<boolean> {
  const key = keys.turn(name);
  const item = (await kv.range({ key })).kvs[0];
  const now = Date.now();
  if (item !== undefined) {
    const at = Number(item.value.toString('utf8'));
    if (Number.isFinite(at) && now < at + everyMs) return false;
  }
  const res = await kv.txn({
    compare: [unchangedSince(key, item)],
    success: [{ type: 'put', key, value: Buffer.from(String(now), 'utf8') }],
  });
  return res.succeeded;
}
