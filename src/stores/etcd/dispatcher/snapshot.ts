/**
 * What a new dispatcher reads before it starts: at one revision, the
 * consumers and their deliveries (with the records of what they hold), the
 * first page of plain producer keys under each spelling, where the ordered
 * queue starts and how long it is, and the queue's configuration. The ordered
 * queue itself is read later, window by window, as consumers need it.
 */
import { prefixEnd, type KeyValue, type Kv } from '../kv.js';
import { getMany } from '../txn-batch.js';
import type { QueueKeys } from '../keys.js';

const PAGE = 1000;

export interface Snapshot {
  readonly revision: number;
  readonly consumerKvs: readonly KeyValue[];
  /** Records of the delivered messages, aligned with `deliveries`. */
  readonly deliveries: readonly { readonly kv: KeyValue; readonly record: KeyValue | null }[];
  readonly producerPages: readonly ProducerPage[];
  readonly firstOrdered: KeyValue | null;
  readonly orderedCount: number;
  readonly config: KeyValue | null;
  /** The rate limit's `tat` (keys.rate), as the last dispatcher left it. */
  readonly rate: KeyValue | null;
  /** groupRateLimit's per-group next start times (keys.groupRates), as the last dispatcher left them. */
  readonly groupRates: readonly KeyValue[];
}

export interface ProducerPage {
  /** The prefix (`/queue/{q}/producer/`, `/q/{q}/p/`, ...). */
  readonly prefix: string;
  readonly kvs: readonly KeyValue[];
  /** Where the next page starts, or null when this was the last. */
  readonly next: string | null;
}

/** Every spelling of the producer prefixes, long and short form. */
export function producerPrefixes(keys: QueueKeys): string[] {
  const long = keys.prefix;
  const short = keys.shortPrefix;
  return [long, short].flatMap((base) => ['producer/', 'p/', 'input/', 'i/'].map((s) => base + s));
}

export async function readPage(
  kv: Kv,
  prefix: string,
  from: string,
  revision?: number,
): Promise<{ kvs: readonly KeyValue[]; next: string | null; revision: number }> {
  const res = await kv.range({
    key: from,
    end: prefixEnd(prefix),
    limit: PAGE,
    ...(revision === undefined ? {} : { revision }),
  });
  const last = res.kvs.at(-1);
  return { kvs: res.kvs, next: res.more && last !== undefined ? `${last.key}\0` : null, revision: res.revision };
}

async function readAll(kv: Kv, prefix: string, revision: number): Promise<KeyValue[]> {
  const out: KeyValue[] = [];
  let from: string | null = prefix;
  while (from !== null) {
    const page = await readPage(kv, prefix, from, revision);
    out.push(...page.kvs);
    from = page.next;
  }
  return out;
}

export async function readSnapshot(kv: Kv, keys: QueueKeys): Promise<Snapshot> {
  const first = await kv.range({ key: keys.orderedStart, end: keys.orderedEnd, limit: 1 });
  const revision = first.revision;
  const consumerPrefixes = [keys.prefix, keys.shortPrefix].flatMap((base) => [`${base}consumer/`, `${base}c/`]);
  const consumerKvs = (await Promise.all(consumerPrefixes.map((p) => readAll(kv, p, revision)))).flat();
  const deliveryKvs = consumerKvs.filter((c) => keys.parse(c.key).kind === 'delivery');
  const ids = deliveryKvs.map((d) => {
    const parsed = keys.parse(d.key);
    return parsed.kind === 'delivery' ? parsed.id : '';
  });
  const records = await getMany(
    kv,
    ids.map((id) => keys.record(id)),
    revision,
  );
  const producerPages = await Promise.all(
    producerPrefixes(keys).map(async (prefix) => {
      const page = await readPage(kv, prefix, prefix, revision);
      return { prefix, kvs: page.kvs, next: page.next };
    }),
  );
  const config = await kv.range({ key: keys.config, revision });
  const rate = await kv.range({ key: keys.rate, revision });
  const groupRates = await readAll(kv, keys.groupRates, revision);
  return {
    revision,
    consumerKvs,
    deliveries: deliveryKvs.map((d, i) => ({ kv: d, record: records[i] ?? null })),
    producerPages,
    firstOrdered: first.kvs[0] ?? null,
    orderedCount: first.count,
    config: config.kvs[0] ?? null,
    rate: rate.kvs[0] ?? null,
    groupRates,
  };
}
