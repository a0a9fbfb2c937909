/**
 * The etcd store's KV port (src/stores/etcd/kv.ts) on the server's own engine, so
 * the etcd store's dispatcher runs inside `kvmq serve` unchanged: ranges and
 * Txns go straight to the engine (through group commit, as any client's),
 * watches are watchers of the hub, and the session is a lease the server
 * keeps alive itself. Its ranges are answered at once, from batches not yet
 * synced too (no read barrier, unlike a client's): all the dispatcher does
 * with what it reads is write, and its writes come after those batches in
 * the WAL, so a crash cannot keep them without what they read.
 */
import { LeaseLostListeners } from '../../stores/etcd/lease-listeners.js';
import { SYSTEM_AUTH } from '../auth/store.js';
import type { Engine } from '../engine.js';
import { keyString } from '../bytes.js';
import { translateEtcdError } from '../../stores/etcd/translate-error.js';
import type {
  Compare as PortCompare,
  KeyValue as PortKeyValue,
  Kv,
  Op,
  OpResult,
  RangeOp,
  RangeResult,
  Session,
  TxnRequest as PortTxnRequest,
  TxnResult,
  Watch,
  WatchEvent,
  WatchHandler,
  WatchRequest,
} from '../../stores/etcd/kv.js';
import { newRangeRequest } from '../proto/types.js';
import type { Compare, Event, KeyValue, RangeRequest, RequestOp, ResponseOp, TxnRequest } from '../proto/types.js';
import {
  CMP_CREATE,
  CMP_EQUAL,
  CMP_GREATER,
  CMP_LEASE,
  CMP_LESS,
  CMP_MOD,
  CMP_NOT_EQUAL,
  CMP_VALUE,
  CMP_VERSION,
  EVENT_DELETE,
  EVENT_PUT,
  SORT_ASCEND,
  SORT_BY_MOD,
  SORT_DESCEND,
  UNION_CREATE,
  UNION_LEASE,
  UNION_MOD,
  UNION_VALUE,
  UNION_VERSION,
} from '../proto/types.js';
import { Watcher, type WatcherSink } from '../watch/hub.js';

const EMPTY = Buffer.alloc(0);
const bytes = (key: string): Buffer => Buffer.from(key, 'latin1');

const TARGETS = {
  version: [CMP_VERSION, UNION_VERSION],
  create: [CMP_CREATE, UNION_CREATE],
  mod: [CMP_MOD, UNION_MOD],
  value: [CMP_VALUE, UNION_VALUE],
  lease: [CMP_LEASE, UNION_LEASE],
} as const;

const RESULTS = { '=': CMP_EQUAL, '!=': CMP_NOT_EQUAL, '<': CMP_LESS, '>': CMP_GREATER } as const;

function portKv(kv: KeyValue): PortKeyValue {
  return {
    key: keyString(kv.key),
    value: kv.value,
    createRevision: kv.createRevision,
    modRevision: kv.modRevision,
    version: kv.version,
    lease: kv.lease.toString(),
  };
}

function compare(c: PortCompare): Compare {
  const [target, union] = TARGETS[c.target];
  const operand = c.operand;
  return {
    result: RESULTS[c.result],
    target,
    key: bytes(c.key),
    rangeEnd: c.end === undefined ? EMPTY : bytes(c.end),
    union,
    number: Buffer.isBuffer(operand) ? 0n : BigInt(operand),
    value: Buffer.isBuffer(operand) ? operand : Buffer.from(String(operand)),
  };
}

function rangeRequest(op: Omit<RangeOp, 'type'>): RangeRequest {
  const req = newRangeRequest(bytes(op.key), op.end === undefined ? EMPTY : bytes(op.end));
  req.limit = op.limit ?? 0;
  req.keysOnly = op.keysOnly === true;
  req.countOnly = op.countOnly === true;
  req.revision = op.revision ?? 0;
  req.minModRevision = op.minModRevision ?? 0;
  if (op.byModRevision !== undefined) {
    req.sortTarget = SORT_BY_MOD;
    req.sortOrder = op.byModRevision === 'ascend' ? SORT_ASCEND : SORT_DESCEND;
  }
  return req;
}

function requestOp(op: Op): RequestOp {
  switch (op.type) {
    case 'range':
      return { kind: 'range', range: rangeRequest(op) };
    case 'put':
      return {
        kind: 'put',
        put: {
          key: bytes(op.key),
          value: op.value,
          lease: op.lease === undefined ? 0n : BigInt(op.lease),
          prevKv: false,
          ignoreValue: false,
          ignoreLease: false,
        },
      };
    case 'delete':
      return {
        kind: 'delete',
        deleteRange: { key: bytes(op.key), rangeEnd: op.end === undefined ? EMPTY : bytes(op.end), prevKv: false },
      };
  }
}

function opResult(res: ResponseOp | undefined): OpResult {
  if (res === undefined) throw new Error('a Txn answered fewer operations than it was given');
  switch (res.kind) {
    case 'range':
      return { type: 'range', kvs: res.range.kvs.map(portKv), count: res.range.count, more: res.range.more };
    case 'put':
      return { type: 'put' };
    case 'delete':
      return { type: 'delete', deleted: res.deleteRange.deleted };
    case 'txn':
      throw new Error('the KV port has no nested Txn');
  }
}

/** The session: one lease, renewed at a third of its TTL, granted again if it is ever lost. */
class LocalSession implements Session {
  private granted: Promise<string> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private readonly lostListeners = new LeaseLostListeners();
  private closed = false;

  constructor(
    private readonly engine: Engine,
    private readonly ttlSeconds: number,
  ) {}

  leaseId(): Promise<string> {
    if (this.closed) return Promise.reject(new Error('kvmq serve is stopping'));
    if (this.granted !== null) return this.granted;
    const granted = this.engine.sessionLease(this.ttlSeconds).then((lease) => {
      const id = lease.id;
      this.timer = setInterval(() => void this.renew(id), (this.ttlSeconds * 1000) / 3);
      this.timer.unref();
      return id.toString();
    });
    granted.catch(() => {
      if (this.granted === granted) this.granted = null;
    });
    this.granted = granted;
    return granted;
  }

  private async renew(id: bigint): Promise<void> {
    const ttl = await this.engine.leaseRenew(id).catch(() => -1);
    if (ttl !== 0 || this.closed) return;
    // Revoked (by an operator, or expired while the loop was stalled): the next use grants a new one.
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    this.granted = null;
    this.lostListeners.tell(id.toString());
  }

  onLost(listener: (leaseId: string) => void): () => void {
    return this.lostListeners.add(listener);
  }

  /** Revokes the lease, so the queues' election keys go now rather than at the TTL. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer !== null) clearInterval(this.timer);
    const granted = this.granted;
    this.granted = null;
    if (granted === null) return;
    const id = await granted.catch(() => null);
    if (id !== null) await this.engine.endSession(BigInt(id)).catch(() => undefined);
  }
}

/** Delivers hub events to a port watch handler, with previous values when asked. */
class HandlerSink implements WatcherSink {
  canceled = false;

  constructor(
    private readonly engine: Engine,
    private readonly handler: WatchHandler,
    private readonly prevKv: boolean,
  ) {}

  ready(): boolean {
    return true;
  }

  deliver(_watcher: Watcher, events: Event[]): void {
    if (this.canceled || events.length === 0) return;
    const out: WatchEvent[] = events.map((ev) => {
      let prev: KeyValue | null = null;
      const creation = ev.type === EVENT_PUT && ev.kv.createRevision === ev.kv.modRevision;
      if (this.prevKv && !creation) prev = this.engine.kv.keyAt(ev.kv.key, ev.kv.modRevision - 1);
      return {
        type: ev.type === EVENT_DELETE ? 'delete' : 'put',
        kv: portKv(ev.kv),
        prevKv: prev === null ? null : portKv(prev),
      };
    });
    try {
      this.handler.events(out);
    } catch (error) {
      // A dispatcher that fails on an event reads its queue again; the server and other watchers go on.
      this.canceled = true;
      this.handler.broken(error instanceof Error ? error : new Error(String(error)));
    }
  }

  compacted(_watcher: Watcher, compactRevision: number): void {
    if (this.canceled) return;
    this.canceled = true;
    this.handler.broken(new Error(`the history was compacted at revision ${compactRevision}`));
  }
}

export class LocalKv implements Kv {
  readonly session: LocalSession;

  constructor(
    private readonly engine: Engine,
    sessionTtlSeconds: number,
  ) {
    this.session = new LocalSession(engine, sessionTtlSeconds);
  }

  private translate(error: unknown): Error {
    return translateEtcdError(error, null, 'kvmq serve');
  }

  range(op: Omit<RangeOp, 'type'>): Promise<RangeResult & { readonly revision: number }> {
    try {
      const res = this.engine.range(rangeRequest(op), SYSTEM_AUTH);
      return Promise.resolve({
        type: 'range',
        kvs: res.kvs.map(portKv),
        count: res.count,
        more: res.more,
        revision: res.revision,
      });
    } catch (error) {
      return Promise.reject(this.translate(error));
    }
  }

  async txn(request: PortTxnRequest): Promise<TxnResult> {
    const req: TxnRequest = {
      compare: request.compare.map(compare),
      success: request.success.map(requestOp),
      failure: (request.failure ?? []).map(requestOp),
    };
    try {
      const res = await this.engine.txn(req, SYSTEM_AUTH);
      return { succeeded: res.succeeded, revision: res.revision, responses: res.responses.map(opResult) };
    } catch (error) {
      throw this.translate(error);
    }
  }

  watch(request: WatchRequest, handler: WatchHandler): Watch {
    const sink = new HandlerSink(this.engine, handler, request.prevKv === true);
    const watcher = new Watcher(
      -1,
      bytes(request.key),
      request.end === undefined ? null : bytes(request.end),
      request.startRevision,
      false,
      false,
      false,
      false,
      sink,
    );
    this.engine.hub.add(watcher);
    return {
      cancel: () => {
        sink.canceled = true;
        this.engine.hub.remove(watcher);
        return Promise.resolve();
      },
    };
  }

  close(): Promise<void> {
    return this.session.close();
  }
}
