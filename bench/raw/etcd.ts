/**
 * etcd's own write rate on the same server, through the same client (npm
 * etcd3, raw KV calls as kvmq's store makes them): one small put per request
 * with 64 in flight (the physical limit kvmq's lifecycle is compared with),
 * and puts `batchSize` at a time as Txns of 125 puts sent together (etcd
 * takes at most 128 ops per Txn), as kvmq's batched enqueue sends them.
 */
import { parseEtcdUrl } from '../../src/stores/etcd/url.js';
import { prefixEnd } from '../../src/stores/etcd/kv.js';
import { inFlight, type BenchSizes } from '../common.js';
import { RAW_PAYLOAD, timeWrites, type RawFigures } from './index.js';

export const RAW_IN_FLIGHT = 64;
// Each measurement writes keys of its own: etcd is not asked to reuse the ones an earlier one deleted.
let opened = 0;
const PUTS_PER_TXN = 125;

/** Opens an etcd3 client and a raw key range for a measurement; `close` deletes the range unless told to keep it. */
export async function rawEtcd(url: string): Promise<{
  put: (key: string) => Promise<unknown>;
  txn: (keys: readonly string[]) => Promise<unknown>;
  prefix: string;
  revision: () => Promise<number>;
  close: (keepKeys?: boolean) => Promise<void>;
}> {
  const options = parseEtcdUrl(url);
  const { Etcd3Kv } = await import('../../src/stores/etcd/etcd3-kv.js');
  const kv = new Etcd3Kv(await import('etcd3'), options);
  const prefix = `${options.prefix}/_raw-bench-${process.pid}-${(++opened).toString()}/`;
  return {
    prefix,
    put: (key) => kv.txn({ compare: [], success: [{ type: 'put', key, value: RAW_PAYLOAD }] }),
    txn: (keys) => kv.txn({ compare: [], success: keys.map((key) => ({ type: 'put', key, value: RAW_PAYLOAD })) }),
    revision: async () => (await kv.range({ key: prefix, limit: 1, keysOnly: true })).revision,
    close: async (keepKeys = false) => {
      if (!keepKeys) await kv.txn({ compare: [], success: [{ type: 'delete', key: prefix, end: prefixEnd(prefix) }] });
      await kv.close();
    },
  };
}

/**
 * `keepKeys`: leave the keys written (on an etcd thrown away after): etcd 3.4 spends several times the CPU on
 * each write for a while after a large delete, which would slow whatever is measured next.
 */
export async function measureRaw(
  url: string,
  sizes: BenchSizes,
  { keepKeys = false }: { keepKeys?: boolean } = {},
): Promise<RawFigures> {
  const raw = await rawEtcd(url);
  let next = 0;
  const key = (): string => `${raw.prefix}${String(next++).padStart(12, '0')}`;
  const single = (n: number): Promise<void> => inFlight(n, RAW_IN_FLIGHT, () => raw.put(key()));
  const batched = async (n: number): Promise<void> => {
    for (let done = 0; done < n; done += sizes.batchSize) {
      const keys = Array.from({ length: Math.min(sizes.batchSize, n - done) }, key);
      const txns: Promise<unknown>[] = [];
      for (let i = 0; i < keys.length; i += PUTS_PER_TXN) txns.push(raw.txn(keys.slice(i, i + PUTS_PER_TXN)));
      await Promise.all(txns);
    }
  };
  try {
    return {
      ...(await timeWrites(sizes, single, batched)),
      setup: `npm etcd3; one put per request, ${RAW_IN_FLIGHT} in flight; ${PUTS_PER_TXN} puts per Txn, a batch's Txns together`,
    };
  } finally {
    await raw.close(keepKeys);
  }
}
