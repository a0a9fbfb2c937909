/**
 * The registry of queues (keys.ts queueRegistry): one empty key per queue, so that listing queues reads
 * one short range instead of every key under `/queue/`. Entries stay after clear (the configuration does).
 */
import { queueRegistry, type QueueKeys } from './keys.js';
import { prefixEnd, type Kv, type Op } from './kv.js';

const PAGE = 1000;

export function registerOp(keys: QueueKeys): Op {
  return { type: 'put', key: keys.registry, value: Buffer.alloc(0) };
}

export async function listQueues(kv: Kv, root: string): Promise<string[]> {
  const prefix = queueRegistry(root);
  const end = prefixEnd(prefix);
  const names: string[] = [];
  let from = prefix;
  for (;;) {
    const page = await kv.range({ key: from, end, limit: PAGE, keysOnly: true });
    for (const item of page.kvs) names.push(item.key.slice(prefix.length));
    const last = page.kvs.at(-1);
    if (!page.more || last === undefined) return names.sort();
    from = `${last.key}\0`;
  }
}
