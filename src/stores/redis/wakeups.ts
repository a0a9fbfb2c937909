/**
 * Wake-ups for idle workers over Redis pub/sub. The scripts that make
 * messages ready (or schedule them) PUBLISH on the queue's `wake` channel;
 * each store has one subscriber connection, opened with the first subscribe().
 *
 * Pub/sub drops what is published while a subscriber is not listening, so
 * each listener is also called once its subscription is confirmed and after
 * every reconnect: a wake-up is a hint to claim again, so a spurious one is
 * cheap and a missed one must not happen.
 *
 * A cancel of a held message is published on the same channel as `cancel <attempt> <id>` (cancel.lua): its
 * cancel listeners hear the message, and its wake listeners nothing. After a reconnect, cancel listeners are
 * told one may have been missed (null).
 */
import { closeConnection, type RedisConnection } from './connection.js';
import type { CanceledMessage } from '../contract/contract.js';
import { QueueListeners } from '../contract/queue-listeners.js';

export class Wakeups {
  // A queue's channel is subscribed while it has listeners of either kind.
  private readonly listeners = new QueueListeners({
    first: (channel) => this.heard(channel, this.cancelListeners),
    last: (channel) => this.unheard(channel, this.cancelListeners),
  });
  private readonly cancelListeners = new QueueListeners<CanceledMessage | null>({
    first: (channel) => this.heard(channel, this.listeners),
    last: (channel) => this.unheard(channel, this.listeners),
  });
  private subscriber: Promise<RedisConnection> | null = null;
  private closed = false;

  constructor(
    private readonly open: () => Promise<RedisConnection>,
    private readonly onError: (error: unknown) => void,
  ) {}

  subscribe(channel: string, listener: () => void): () => void {
    return this.listeners.add(channel, listener);
  }

  /** Cancels of held messages published on a queue's wake channel. */
  subscribeCancels(channel: string, listener: (canceled: CanceledMessage | null) => void): () => void {
    return this.cancelListeners.add(channel, listener);
  }

  /** A channel's first listener of one kind: subscribed unless `other` kind listens already. */
  private heard(channel: string, other: { has(channel: string): boolean }): void {
    if (other.has(channel)) return;
    void this.connection()
      .then((redis) => redis.subscribe(channel))
      .then(() => this.fire(channel))
      .catch(this.onError);
  }

  /** A channel's last listener of one kind gone: unsubscribed unless `other` kind still listens. */
  private unheard(channel: string, other: { has(channel: string): boolean }): void {
    if (other.has(channel)) return;
    void this.connection()
      .then((redis) => redis.unsubscribe(channel))
      .catch(this.onError);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.listeners.clear();
    this.cancelListeners.clear();
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
      redis.on('message', (channel: string, message: string) => {
        if (message.startsWith('cancel ')) this.canceled(channel, message);
        else this.fire(channel);
      });
      // After a reconnect ioredis subscribes again; what was published meanwhile is lost.
      let connectedBefore = false;
      redis.on('ready', () => {
        if (connectedBefore)
          for (const channel of new Set([...this.listeners.queues(), ...this.cancelListeners.queues()]))
            this.fire(channel);
        connectedBefore = true;
      });
      // Connection errors surface through the store's commands; reconnects are automatic.
      redis.on('error', () => undefined);
      return redis;
    });
    return this.subscriber;
  }

  /** A subscription confirmed, or a reconnect: wake listeners claim again, cancel listeners renew. */
  private fire(channel: string): void {
    this.listeners.notify(channel);
    this.cancelListeners.notify(channel, null);
  }

  private canceled(channel: string, message: string): void {
    const at = message.indexOf(' ', 7);
    const canceled = { attempt: Number(message.slice(7, at)), id: message.slice(at + 1) };
    this.cancelListeners.notify(channel, canceled);
  }
}
