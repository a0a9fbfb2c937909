/**
 * Each queue's dry-run state and configuration as this process uses them, kept current by watches: claims,
 * finishes and enqueues read them here rather than from etcd each time.
 */
import { decodeConfig, decodeEoq, type Eoq } from './queue-state.js';
import type { QueueKeys } from './keys.js';
import type { Kv, Watch, WatchEvent } from './kv.js';
import type { QueueConfig } from '../../model/types.js';

export interface QueueWatch {
  eoq: Eoq;
  config: QueueConfig | null;
  /** The mod revision of the configuration held (a watch event older than it is not applied). */
  configRev: number;
  watch: Watch;
}

export class QueueWatches {
  private readonly watches = new Map<string, Promise<QueueWatch>>();

  constructor(
    private readonly kv: Kv,
    private readonly keysOf: (queue: string) => QueueKeys,
  ) {}

  /** The queue's state, read and watched from its first use (read again after a watch broke). */
  get(queue: string): Promise<QueueWatch> {
    let state = this.watches.get(queue);
    if (state === undefined) {
      state = this.start(queue, this.keysOf(queue));
      this.watches.set(queue, state);
      state.catch(() => this.watches.delete(queue));
    }
    return state;
  }

  /** The queue's state if this process watches it already (none is started). */
  peek(queue: string): Promise<QueueWatch> | undefined {
    return this.watches.get(queue);
  }

  close(): void {
    for (const state of this.watches.values()) void state.then((s) => s.watch.cancel()).catch(() => undefined);
    this.watches.clear();
  }

  private async start(queue: string, keys: QueueKeys): Promise<QueueWatch> {
    const res = await this.kv.txn({
      compare: [],
      success: [
        { type: 'range', key: keys.eoq },
        { type: 'range', key: keys.config },
      ],
    });
    const [eoqRes, configRes] = res.responses;
    const eoqKv = eoqRes?.type === 'range' ? eoqRes.kvs[0] : undefined;
    const configKv = configRes?.type === 'range' ? configRes.kvs[0] : undefined;
    const s: QueueWatch = {
      eoq: decodeEoq(eoqKv?.value, eoqKv?.modRevision ?? 0),
      config: decodeConfig(keys, configKv?.value),
      configRev: configKv?.modRevision ?? 0,
      watch: { cancel: () => Promise.resolve() },
    };
    const handler = {
      events: (events: readonly WatchEvent[]) => {
        for (const e of events) apply(s, keys, e);
      },
      broken: () => {
        this.watches.delete(queue);
      },
    };
    // eoq and config sort next to each other only with the GC index between; two small watches instead.
    const w1 = this.kv.watch({ key: keys.eoq, startRevision: res.revision + 1 }, handler);
    const w2 = this.kv.watch({ key: keys.config, startRevision: res.revision + 1 }, handler);
    s.watch = {
      cancel: async () => {
        await Promise.all([w1.cancel(), w2.cancel()]);
      },
    };
    return s;
  }
}

function apply(s: QueueWatch, keys: QueueKeys, e: WatchEvent): void {
  if (e.kv.key === keys.eoq) {
    s.eoq =
      e.type === 'delete' ? { dryRuns: 0, until: 0, rev: e.kv.modRevision } : decodeEoq(e.kv.value, e.kv.modRevision);
  } else if (e.kv.key === keys.config && e.kv.modRevision > s.configRev) {
    s.configRev = e.kv.modRevision;
    try {
      s.config = decodeConfig(keys, e.type === 'delete' ? undefined : e.kv.value);
    } catch {
      s.config = null;
    }
  }
}
