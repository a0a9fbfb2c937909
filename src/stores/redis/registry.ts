/**
 * Which queues exist, without scanning the keyspace (which on a Redis Cluster means every node, and
 * costs every key): a set `<prefix>:queues` that each process adds a queue to once, before its first
 * enqueue or configure of it. A listing reads the set and keeps the queues that still have a
 * configuration or messages. The set has no hash tag: it lives in one slot, written by a plain SADD,
 * not by the queue's scripts (which may touch their own slot only).
 */
import { queueKey, registryKey } from './keys.js';
import type { Scripts } from './scripts.js';

export class QueueRegistry {
  /** Queues this process has added (or is adding) to the set. */
  private readonly added = new Map<string, Promise<void>>();

  constructor(
    private readonly scripts: Scripts,
    private readonly prefix: string,
  ) {}

  /** Adds the queue to the set, once per process; resolves when it is there. */
  add(queue: string): Promise<void> {
    let adding = this.added.get(queue);
    if (adding === undefined) {
      adding = this.scripts.call((redis) => redis.sadd(registryKey(this.prefix), queue)).then(() => undefined);
      adding.catch(() => this.added.delete(queue));
      this.added.set(queue, adding);
    }
    return adding;
  }

  /** Queues that have a configuration or messages now, sorted by name: O(queues ever added). */
  async list(): Promise<string[]> {
    const names = await this.scripts.call((redis) => redis.smembers(registryKey(this.prefix)));
    const keys = (queue: string): [string, string] => [
      queueKey(this.prefix, queue, 'conf'),
      queueKey(this.prefix, queue, 'messages'),
    ];
    const present = await this.scripts.call(async (redis) => {
      // One round trip on a single Redis; a cluster's pipeline must stay in one slot, so there one call per queue.
      if (redis.isCluster) return Promise.all(names.map((queue) => redis.exists(...keys(queue))));
      const pipeline = redis.pipeline();
      for (const queue of names) pipeline.exists(...keys(queue));
      return ((await pipeline.exec()) ?? []).map(([error, count]) => {
        if (error !== null) throw error;
        return Number(count);
      });
    });
    return names.filter((_, i) => (present[i] ?? 0) > 0).sort();
  }
}
