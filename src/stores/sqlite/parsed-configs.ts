/**
 * Each queue's configuration as last parsed, with the JSON it came from (both SQL stores keep it in the queue's
 * row): parsed once per change; a configuration from before a field existed reads with its default.
 */
import { DEFAULT_QUEUE_CONFIG, withConfigDefaults } from '../../model/config.js';
import type { QueueConfig } from '../../model/types.js';

export class ParsedConfigs {
  private readonly configs = new Map<string, { json: string | null; config: QueueConfig }>();

  /** The configuration of `queue` stored as `json` (null: none stored, the defaults). */
  of(queue: string, json: string | null): QueueConfig {
    const cached = this.configs.get(queue);
    if (cached?.json === json) return cached.config;
    const config = json === null ? DEFAULT_QUEUE_CONFIG : withConfigDefaults(JSON.parse(json) as Partial<QueueConfig>);
    this.configs.set(queue, { json, config });
    return config;
  }
}
