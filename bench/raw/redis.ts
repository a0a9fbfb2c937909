/**
 * Redis's own write rate on the same server, through the same client library
 * (ioredis, one connection, RESP2) kvmq's store uses: one small keyed field per
 * HSET, one after another, and fields `batchSize` per MULTI/EXEC, the atomic
 * unit closest to one of kvmq's script calls.
 */
import { Cluster, Redis } from 'ioredis';
import { tlsOptions } from '../../src/stores/redis/connection.js';
import { parseRedisUrl } from '../../src/stores/redis/url.js';
import type { BenchSizes } from '../common.js';
import { RAW_PAYLOAD, rawIds, timeWrites, type RawFigures } from './index.js';

export async function measureRaw(url: string, sizes: BenchSizes): Promise<RawFigures> {
  const options = parseRedisUrl(url);
  const common = {
    username: options.username,
    password: options.password,
    db: options.db,
    tls: options.tls ? tlsOptions(options) : undefined,
    protocol: 2 as const,
  };
  const redis = options.cluster
    ? new Cluster([...options.nodes], { redisOptions: common, lazyConnect: true })
    : new Redis({ ...common, host: options.nodes[0]?.host, port: options.nodes[0]?.port, lazyConnect: true });
  await redis.connect();
  const key = `${options.prefix}:{raw-bench-${process.pid}}:messages`;
  const id = rawIds();
  const single = async (n: number): Promise<void> => {
    for (let i = 0; i < n; i++) await redis.hset(key, id(), RAW_PAYLOAD);
  };
  const batched = async (n: number): Promise<void> => {
    for (let done = 0; done < n; done += sizes.batchSize) {
      const multi = redis.multi();
      for (let i = 0; i < Math.min(sizes.batchSize, n - done); i++) multi.hset(key, id(), RAW_PAYLOAD);
      await multi.exec();
    }
  };
  try {
    return {
      ...(await timeWrites(sizes, single, batched)),
      setup: 'ioredis, one connection; HSET per field, MULTI/EXEC per batch; the server as it runs (AOF as configured)',
    };
  } finally {
    await redis.unlink(key);
    redis.disconnect();
  }
}
