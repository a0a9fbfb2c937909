/**
 * The queue dispatching that runs inside `kvmq serve`: every queue that has
 * keys under `/queue/{q}/` or `/q/{q}/` gets a dispatcher candidate (the etcd
 * store's code, unchanged), so a plain etcd client can produce with one put
 * and consume with a watch and a delete, with no kvmq process running.
 * Queues are found by a scan at start and by watching those prefixes after.
 */
import { checkQueueName } from '../../model/validate.js';
import { DispatcherHost } from '../../stores/etcd/dispatcher/host.js';
import type { DispatcherLog } from '../../stores/etcd/dispatcher/types.js';
import { prefixEnd, type Watch } from '../../stores/etcd/kv.js';
import type { Engine } from '../engine.js';
import { LocalKv } from './local-kv.js';

/** The forms of the etcds protocol's queue keys, with no key prefix (kvmq serve dispatches the root). */
const PREFIXES = ['/queue/', '/q/'];
/** The server's session lease: its election keys go this long after a crash. */
const SESSION_TTL_SECONDS = 10;

function queueName(prefix: string, key: string): string | null {
  const name = key.slice(prefix.length).split('/')[0] ?? '';
  try {
    return checkQueueName(name);
  } catch {
    return null;
  }
}

export class QueueDispatch {
  private readonly kv: LocalKv;
  private readonly host: DispatcherHost;
  private readonly held = new Map<string, () => void>();
  private readonly watches: Watch[] = [];
  private closed = false;

  constructor(
    engine: Engine,
    readonly nodeId: string,
    private readonly log: DispatcherLog,
  ) {
    this.kv = new LocalKv(engine, SESSION_TTL_SECONDS);
    this.host = new DispatcherHost(this.kv, '', nodeId, log);
  }

  /** Queues being dispatched (or campaigned for) by the server. */
  get queues(): string[] {
    return [...this.held.keys()].sort();
  }

  dispatching(queue: string): boolean {
    return this.host.dispatching(queue);
  }

  async start(): Promise<void> {
    let revision = 0;
    for (const prefix of PREFIXES) revision = Math.max(revision, await this.scan(prefix));
    for (const prefix of PREFIXES) {
      this.watches.push(
        this.kv.watch(
          { key: prefix, end: prefixEnd(prefix), startRevision: revision + 1 },
          {
            events: (events) => {
              for (const ev of events) if (ev.type === 'put') this.found(prefix, ev.kv.key);
            },
            broken: (error) => this.log('error', `kvmq serve stopped finding new queues: ${error.message}`),
          },
        ),
      );
    }
  }

  /** Finds every queue under a prefix with a few reads per queue, not one per key. */
  private async scan(prefix: string): Promise<number> {
    const end = prefixEnd(prefix);
    let from = prefix;
    let revision = 0;
    for (;;) {
      const page = await this.kv.range({ key: from, end, limit: 1, keysOnly: true });
      revision = page.revision;
      const key = page.kvs[0]?.key;
      if (key === undefined) return revision;
      const name = key.slice(prefix.length).split('/')[0] ?? '';
      this.found(prefix, key);
      // Past this queue's own key and its subtree; names that extend it ('q-2' after 'q') come between.
      from = key === `${prefix}${name}` ? `${prefix}${name}\0` : `${prefix}${name}0`;
    }
  }

  private found(prefix: string, key: string): void {
    if (this.closed) return;
    const name = queueName(prefix, key);
    if (name === null || this.held.has(name)) return;
    this.held.set(name, this.host.hold(name));
    this.log('info', `dispatching queue ${name}`);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const watch of this.watches) await watch.cancel();
    for (const release of this.held.values()) release();
    await this.host.close();
    await this.kv.close();
  }
}
