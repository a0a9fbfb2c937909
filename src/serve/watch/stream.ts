/**
 * One Watch RPC stream, as etcd's serverWatchStream runs it: create, cancel
 * and progress requests in, created/cancelled/event/progress responses out,
 * watch IDs chosen by the client or counted from 0 per stream, prev_kv read
 * from the revision before each event, large responses split into fragments
 * when asked, and a progress notification every interval for watchers with
 * progress_notify that saw no event in it.
 */
import type { AuthInfo, AuthStore } from '../auth/store.js';
import { Code, EtcdError, WatchCancelReason } from '../errors.js';
import type { KvStore } from '../mvcc/kvstore.js';
import type { ResponseHeaders } from '../proto/header.js';
import type { Event, KeyValue, WatchCreateRequest, WatchRequest, WatchResponse } from '../proto/types.js';
import { EVENT_PUT, FILTER_NODELETE, FILTER_NOPUT } from '../proto/types.js';
import { encodeWatchResponse, watchResponseSize } from '../proto/watch.js';
import type { WatchHub, WatcherSink } from './hub.js';
import { Watcher } from './hub.js';

/** etcd's clientv3.InvalidWatchID: the ID of responses that belong to no watcher. */
const INVALID_WATCH_ID = -1;

/** grpc-go's text for a status error, which etcd puts in a watch's cancel reason. */
const CODE_NAMES: Record<number, string> = {
  [Code.INVALID_ARGUMENT]: 'InvalidArgument',
  [Code.PERMISSION_DENIED]: 'PermissionDenied',
  [Code.UNAUTHENTICATED]: 'Unauthenticated',
};

function statusText(error: EtcdError): string {
  return `rpc error: code = ${CODE_NAMES[error.code] ?? 'Unknown'} desc = ${error.message}`;
}

/** A stream with this many bytes unsent pauses its watchers until it drains. */
export const WATCH_BACKLOG_LIMIT = 16 * 1024 * 1024;

export interface WatchStreamDeps {
  readonly hub: WatchHub;
  readonly kv: KvStore;
  readonly auth: AuthStore;
  readonly header: ResponseHeaders;
  /** etcd's progress report interval (10 minutes by default); each stream adds up to 10% jitter. */
  readonly progressIntervalMs: number;
  /** Responses at least this large are split when the watcher asked for fragments. */
  readonly maxResponseBytes: number;
}

/** prev_kv lookups, shared by every watcher an event goes to. */
const prevKvCache = new WeakMap<Event, KeyValue | null>();

export class WatchStream implements WatcherSink {
  private readonly watchers = new Map<number, Watcher>();
  /** Watchers created with progress_notify, and whether they saw no event since the last tick. */
  private readonly progress = new Map<number, boolean>();
  private nextId = 0;
  private readonly timer: NodeJS.Timeout;
  private closed = false;

  constructor(
    private readonly deps: WatchStreamDeps,
    private readonly token: string | undefined,
    private readonly send: (message: Buffer) => void,
    private readonly backlog: () => number = () => 0,
  ) {
    const interval = deps.progressIntervalMs + Math.floor(Math.random() * (deps.progressIntervalMs / 10));
    this.timer = setInterval(() => this.progressTick(), interval);
    this.timer.unref();
  }

  onRequest(req: WatchRequest): void {
    if (this.closed) return;
    switch (req.kind) {
      case 'create':
        this.create(req.create);
        return;
      case 'cancel':
        this.cancel(req.watchId);
        return;
      case 'progress':
        this.reply({ revision: this.deps.hub.durableRev(), watchId: INVALID_WATCH_ID });
        return;
      case 'none':
        return;
    }
  }

  private reply(fields: Partial<WatchResponse> & { revision: number }): void {
    const resp: WatchResponse = {
      watchId: 0,
      created: false,
      canceled: false,
      compactRevision: 0,
      cancelReason: '',
      fragment: false,
      events: [],
      ...fields,
    };
    this.send(encodeWatchResponse(this.deps.header, resp));
  }

  private authInfo(): AuthInfo {
    return this.deps.auth.authInfo(this.token);
  }

  private create(req: WatchCreateRequest): void {
    const { hub, auth } = this.deps;
    const key = req.key.length === 0 ? Buffer.from([0]) : req.key;
    const rangeEnd = req.rangeEnd;
    try {
      auth.checkRange(this.authInfo(), key, rangeEnd);
    } catch (error) {
      if (!(error instanceof EtcdError)) throw error;
      const reason =
        error.code === Code.UNAUTHENTICATED || error.code === Code.INVALID_ARGUMENT
          ? statusText(error)
          : statusText(new EtcdError(Code.PERMISSION_DENIED, 'etcdserver: permission denied'));
      this.reply({
        revision: hub.durableRev(),
        watchId: INVALID_WATCH_ID,
        created: true,
        canceled: true,
        cancelReason: reason,
      });
      return;
    }
    // etcd: no range_end watches one key; "\0" watches every key from `key` on.
    const end = rangeEnd.length === 0 ? null : rangeEnd.length === 1 && rangeEnd[0] === 0 ? Buffer.alloc(0) : rangeEnd;
    const wsrev = hub.durableRev();
    const failed = (reason: string): void =>
      this.reply({ revision: wsrev, watchId: INVALID_WATCH_ID, created: true, canceled: true, cancelReason: reason });
    if (end !== null && end.length > 0 && Buffer.compare(key, end) >= 0) {
      failed(WatchCancelReason.emptyRange);
      return;
    }
    let id = req.watchId;
    if (id === 0) {
      while (this.watchers.has(this.nextId)) this.nextId++;
      id = this.nextId++;
    } else if (this.watchers.has(id)) {
      failed(WatchCancelReason.duplicateId);
      return;
    }
    const watcher = new Watcher(
      id,
      key,
      end,
      req.startRevision,
      req.filters.includes(FILTER_NOPUT),
      req.filters.includes(FILTER_NODELETE),
      req.prevKv,
      req.fragment,
      this,
    );
    this.watchers.set(id, watcher);
    if (req.progressNotify) this.progress.set(id, true);
    this.reply({ revision: wsrev, watchId: id, created: true });
    this.deps.hub.add(watcher);
  }

  private cancel(id: number): void {
    const watcher = this.watchers.get(id);
    if (watcher === undefined) return;
    this.deps.hub.remove(watcher);
    this.watchers.delete(id);
    this.progress.delete(id);
    this.reply({ revision: this.deps.hub.durableRev(), watchId: id, canceled: true });
  }

  ready(): boolean {
    return this.closed || this.backlog() < WATCH_BACKLOG_LIMIT;
  }

  deliver(watcher: Watcher, events: Event[], revision: number): void {
    if (this.closed) return;
    const out = watcher.prevKv ? events.map((ev) => this.withPrevKv(ev)) : events;
    const resp: WatchResponse = {
      revision,
      watchId: watcher.id,
      created: false,
      canceled: false,
      compactRevision: 0,
      cancelReason: '',
      fragment: false,
      events: out,
    };
    if (watcher.fragment) this.sendFragments(resp);
    else this.send(encodeWatchResponse(this.deps.header, resp));
    if (events.length > 0 && this.progress.has(watcher.id)) this.progress.set(watcher.id, false);
  }

  compacted(watcher: Watcher, compactRevision: number): void {
    if (this.closed) return;
    this.reply({ revision: 0, watchId: watcher.id, compactRevision, canceled: true });
  }

  private withPrevKv(ev: Event): Event {
    // A creation has no previous value.
    if (ev.type === EVENT_PUT && ev.kv.createRevision === ev.kv.modRevision) return ev;
    let prev = prevKvCache.get(ev);
    if (prev === undefined) {
      prev = this.deps.kv.keyAt(ev.kv.key, ev.kv.modRevision - 1);
      prevKvCache.set(ev, prev);
    }
    return prev === null ? ev : { type: ev.type, kv: ev.kv, prevKv: prev };
  }

  /** etcd's sendFragments: events are packed while the response stays under the limit. */
  private sendFragments(resp: WatchResponse): void {
    const { header, maxResponseBytes } = this.deps;
    if (resp.events.length < 2 || watchResponseSize(header, resp) < maxResponseBytes) {
      this.send(encodeWatchResponse(header, resp));
      return;
    }
    let idx = 0;
    for (;;) {
      const cur: WatchResponse = { ...resp, events: [], fragment: true };
      while (idx < resp.events.length) {
        cur.events.push(resp.events[idx] as Event);
        if (cur.events.length > 1 && watchResponseSize(header, cur) >= maxResponseBytes) {
          cur.events.pop();
          break;
        }
        idx++;
      }
      if (idx === resp.events.length) cur.fragment = false;
      this.send(encodeWatchResponse(header, cur));
      if (!cur.fragment) return;
    }
  }

  private progressTick(): void {
    for (const [id, quiet] of this.progress) {
      const watcher = this.watchers.get(id);
      if (quiet && watcher !== undefined) this.deps.hub.progress(watcher);
      this.progress.set(id, true);
    }
  }

  /** The client went away: every watcher of the stream ends. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    for (const watcher of this.watchers.values()) this.deps.hub.remove(watcher);
    this.watchers.clear();
    this.progress.clear();
  }
}
