/**
 * Wake-ups for idle workers over Redis pub/sub. The scripts that make
 * messages ready (or schedule them) PUBLISH on the queue's `wake` channel;
 * each store has one subscriber connection, opened with the first subscribe().
 *
 * Pub/sub drops what is published while a subscriber is not listening, so
 * each listener is also called once its subscription is confirmed and after
 * every reconnect: a wake-up is a hint to claim again, so a spurious one is
 * cheap and a missed one must not happen.
 */
import { closeConnection, type RedisConnection } from './connection.js';

export class Wakeups {
  private readonly listeners = new Map<string, Set<() => void>>();
  private subscriber: Promise<RedisConnection> | null = null;
  private closed = false;

  constructor(
    private readonly open: () => Promise<RedisConnection>,
    private readonly onError: (error: unknown) => void,
  ) {}

  subscribe(channel: string, listener: () => void): () => void {
    let set = this.listeners.get(channel);
    if (set === undefined) {
      set = new Set();
      this.listeners.set(channel, set);
      void this.connection()
        .then((redis) => redis.subscribe(channel))
        .then(() => this.fire(channel))
        .catch(this.onError);
    }
    set.add(listener);
    const listeners = set;
    return () => {
      listeners.delete(listener);
      if (listeners.size > 0 || this.listeners.get(channel) !== listeners) return;
      this.listeners.delete(channel);
      void this.connection()
        .then((redis) => redis.unsubscribe(channel))
        .catch(this.onError);
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.listeners.clear();
    const subscriber = this.subscriber;
    this.subscriber = null;
    if (subscriber === null) return;
    const redis = await subscriber.catch(() => null);
    if (redis === null) return;
    await closeConnection(redis);
  }

  private connection(): Promise<RedisConnection> {
    if (this.closed) return Promise.reject(new Error('the Redis store is closed'));
    this.subscriber ??= this.open().then((redis) => {
      redis.on('message', (channel: string) => this.fire(channel));
      // After a reconnect ioredis subscribes again; what was published meanwhile is lost.
      let connectedBefore = false;
      redis.on('ready', () => {
        if (connectedBefore) for (const channel of this.listeners.keys()) this.fire(channel);
        connectedBefore = true;
      });
      // Connection errors surface through the store's commands; reconnects are automatic.
      redis.on('error', () => undefined);
      return redis;
    });
    return this.subscriber;
  }

  private fire(channel: string): void {
    for (const listener of this.listeners.get(channel) ?? []) listener();
  }
}
