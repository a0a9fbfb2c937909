/**
 * A client's copy of the queues' configurations: enqueues with filters read it (filter enums change rarely), and
 * producer GC reads its interval. Kept for a second, and replaced by what the store answers to a change.
 */
import type { QueueConfig } from '../model/types.js';
import type { Configured, Store } from '../stores/contract/contract.js';

// Filter enums change rarely; a short cache keeps enqueue from reading them every time.
const CONFIG_CACHE_MS = 1000;

export class QueueConfigs {
  private readonly cache = new Map<string, { config: QueueConfig; readAt: number }>();

  constructor(private readonly store: Store) {}

  /** The queue's configuration, read at most CONFIG_CACHE_MS ago. */
  async cached(queue: string): Promise<QueueConfig> {
    const cached = this.cache.get(queue);
    if (cached !== undefined && Date.now() - cached.readAt < CONFIG_CACHE_MS) return cached.config;
    const config = await this.store.config(queue);
    this.cache.set(queue, { config, readAt: Date.now() });
    return config;
  }

  /** The configuration last read, however long ago; undefined when none was. */
  known(queue: string): QueueConfig | undefined {
    return this.cache.get(queue)?.config;
  }

  /** Writes a checked patch and keeps what the store answered. */
  async write(queue: string, patch: Partial<QueueConfig>): Promise<Configured> {
    const configured = await this.store.configure(queue, patch);
    this.cache.set(queue, { config: configured.config, readAt: Date.now() });
    return configured;
  }
}
