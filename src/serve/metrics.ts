/**
 * `kvmq serve --metrics`: calls by method and status, WAL sync (group commit) latency, and, read at scrape
 * time, the database's size, watchers, leases, the revision, and how far the dispatcher is behind on each
 * queue it serves.
 */
import type { Counter, Histogram, Registry } from 'prom-client';
import type { RunningServer, ServeInstruments } from './index.js';
import { SORT_ASCEND, SORT_BY_CREATE, newRangeRequest } from './proto/types.js';
import { SYSTEM_AUTH } from './auth/store.js';
import { loadPromClient, ROUND_TRIP_BUCKETS, type PromClient } from '../metrics/prom.js';

/** The etcds protocol's two spellings of a queue's producer prefix. */
const PRODUCER_PREFIXES = [(queue: string) => `/queue/${queue}/producer/`, (queue: string) => `/q/${queue}/p/`];

export class ServeMetrics implements ServeInstruments {
  readonly registry: Registry;
  private readonly requests: Counter<'method' | 'code'>;
  private readonly syncSeconds: Histogram;
  private server: RunningServer | null = null;

  private constructor(prom: PromClient) {
    this.registry = new prom.Registry();
    const registers = [this.registry];
    this.requests = new prom.Counter({
      name: 'kvmq_serve_requests_total',
      help: 'Calls answered, by method (gRPC and the JSON gateway alike) and gRPC status',
      labelNames: ['method', 'code'],
      registers,
    });
    this.syncSeconds = new prom.Histogram({
      name: 'kvmq_serve_fsync_duration_seconds',
      help: 'fdatasync of the write-ahead log: one per group commit, every write waits for one',
      buckets: ROUND_TRIP_BUCKETS,
      registers,
    });
    const read = <T>(fn: (server: RunningServer) => T): T | null => (this.server === null ? null : fn(this.server));
    const single = (name: string, help: string, value: (server: RunningServer) => number): void => {
      new prom.Gauge({
        name,
        help,
        registers,
        collect() {
          const v = read(value);
          if (v !== null) this.set(v);
        },
      });
    };
    single(
      'kvmq_serve_db_size_bytes',
      "The database file's size (etcd's dbSize)",
      (s) => s.engine.backend.sizes().size,
    );
    single(
      'kvmq_serve_db_size_in_use_bytes',
      "Bytes of the database file's live pages (etcd's dbSizeInUse)",
      (s) => s.engine.backend.sizes().inUse,
    );
    single('kvmq_serve_watchers', 'Watchers open on the server', (s) => s.engine.hub.size);
    single('kvmq_serve_leases', 'Leases granted and not expired', (s) => s.engine.lessor.size);
    single('kvmq_serve_revision', "The store's current revision", (s) => s.engine.currentRev);
    const perQueue = (name: string, help: string, value: (server: RunningServer, queue: string) => number): void => {
      new prom.Gauge({
        name,
        help,
        labelNames: ['queue'],
        registers,
        collect() {
          this.reset();
          const server = read((s) => s);
          for (const queue of server?.dispatch?.queues ?? [])
            this.set({ queue }, value(server as RunningServer, queue));
        },
      });
    };
    perQueue('kvmq_serve_dispatching', "1 where this server is the queue's dispatcher, 0 where another is", (s, q) =>
      s.dispatch?.dispatching(q) === true ? 1 : 0,
    );
    perQueue(
      'kvmq_serve_dispatcher_pending_puts',
      'Producer puts the dispatcher has not moved into the ordered queue yet',
      (s, q) => pendingPuts(s, q).count,
    );
    perQueue(
      'kvmq_serve_dispatcher_lag_revisions',
      'Revisions between the newest and the oldest producer put not yet moved by the dispatcher; 0 when none waits',
      (s, q) => {
        const oldest = pendingPuts(s, q).oldestRevision;
        return oldest === null ? 0 : s.engine.currentRev - oldest;
      },
    );
  }

  static async create(): Promise<ServeMetrics> {
    return new ServeMetrics(await loadPromClient());
  }

  /** The running server the scrape-time gauges read. */
  bind(server: RunningServer): void {
    this.server = server;
  }

  called(method: string, code: string): void {
    this.requests.inc({ method, code });
  }

  synced(seconds: number): void {
    this.syncSeconds.observe(seconds);
  }
}

/** The queue's unmoved producer puts: how many, and the oldest one's create revision (null for none). */
function pendingPuts(server: RunningServer, queue: string): { count: number; oldestRevision: number | null } {
  let count = 0;
  let oldestRevision: number | null = null;
  for (const prefixOf of PRODUCER_PREFIXES) {
    const prefix = Buffer.from(prefixOf(queue));
    const end = Buffer.from(prefix);
    end[end.length - 1] = (end[end.length - 1] as number) + 1;
    const request = newRangeRequest(prefix, end);
    request.limit = 1;
    request.keysOnly = true;
    request.sortTarget = SORT_BY_CREATE;
    request.sortOrder = SORT_ASCEND;
    const response = server.engine.range(request, SYSTEM_AUTH);
    count += response.count;
    const first = response.kvs[0];
    if (first !== undefined) oldestRevision = Math.min(oldestRevision ?? Infinity, first.createRevision);
  }
  return { count, oldestRevision };
}
