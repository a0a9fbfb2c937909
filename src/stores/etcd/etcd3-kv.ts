/**
 * The KV port (kv.ts) on the npm `etcd3` client: raw KV calls (so one Txn is
 * one request, with etcd's own limits), watches that resume exactly after the
 * last revision they delivered, and one session lease kept alive in the
 * background (etcd3-session.ts). Every call asks for a member with a leader,
 * and moves off one without (etcd3-members.ts). Loaded only when an etcd URL
 * is opened.
 */
import type * as Etcd3 from 'etcd3';
import type { Interceptor, InterceptorOptions, NextCall } from '@grpc/grpc-js';
import type {
  Compare,
  KeyValue,
  Kv,
  Op,
  OpResult,
  RangeOp,
  RangeResult,
  TxnRequest,
  TxnResult,
  Watch,
  WatchEvent,
  WatchHandler,
  WatchRequest,
} from './kv.js';
import type { EtcdOptions } from './url.js';
import { translateEtcdError } from './translate-error.js';
import { EtcdMembers, wasNotSent, type Policy } from './etcd3-members.js';
import { EtcdSession } from './etcd3-session.js';
import { closeStream } from './etcd3-stream.js';

type Lib = typeof Etcd3;

// A unary call that takes longer than this has failed (etcd down, no quorum): the caller sees an error.
const CALL_DEADLINE_MS = 15_000;
// etcd sends a watcher that fell behind up to 1000 revisions in one response, megabytes when values are large;
// grpc-js refuses messages over 4 MiB by default, which left such a watch retrying forever. etcd's own client
// accepts up to 2 GiB; so does kvmq.
const MAX_RECEIVE_BYTES = 2 ** 31 - 1;
// gRPC status codes after which a watch stream is opened again (cancelled, unknown, deadline, internal,
// unavailable); any other error would come back the same, so the watch reports itself broken.
const TRANSIENT_STREAM_CODES = new Set([1, 2, 4, 13, 14]);

const bytes = (key: string): Buffer => Buffer.from(key, 'latin1');

function keyValue(kv: Etcd3.IKeyValue): KeyValue {
  return {
    key: kv.key.toString('latin1'),
    value: kv.value,
    createRevision: Number(kv.create_revision),
    modRevision: Number(kv.mod_revision),
    version: Number(kv.version),
    lease: kv.lease,
  };
}

/**
 * The converter of compares for this library's enums. Each Txn converts a compare or two per message, so the
 * tables are made once and each compare is one object, no spreads.
 */
function compareWith(lib: Lib): (c: Compare) => Etcd3.ICompare {
  const targets = {
    version: lib.CompareTarget.Version,
    create: lib.CompareTarget.Create,
    mod: lib.CompareTarget.Mod,
    value: lib.CompareTarget.Value,
    lease: lib.CompareTarget.Lease,
  };
  const results = {
    '=': lib.CompareResult.Equal,
    '>': lib.CompareResult.Greater,
    '<': lib.CompareResult.Less,
    '!=': lib.CompareResult.NotEqual,
  };
  return (c) => {
    const out: Etcd3.ICompare = { key: bytes(c.key), target: targets[c.target], result: results[c.result] };
    if (c.end !== undefined) out.range_end = bytes(c.end);
    switch (c.target) {
      case 'version':
        out.version = Number(c.operand);
        break;
      case 'create':
        out.create_revision = Number(c.operand);
        break;
      case 'mod':
        out.mod_revision = Number(c.operand);
        break;
      case 'value':
        out.value = Buffer.isBuffer(c.operand) ? c.operand : Buffer.from(String(c.operand));
        break;
      case 'lease':
        out.lease = String(c.operand);
        break;
    }
    return out;
  };
}

function rangeRequest(op: Omit<RangeOp, 'type'>): Etcd3.IRangeRequest {
  const out: Etcd3.IRangeRequest = { key: bytes(op.key) };
  if (op.end !== undefined) out.range_end = bytes(op.end);
  if (op.limit !== undefined) out.limit = op.limit;
  if (op.keysOnly === true) out.keys_only = true;
  if (op.countOnly === true) out.count_only = true;
  if (op.revision !== undefined) out.revision = op.revision;
  if (op.minModRevision !== undefined) out.min_mod_revision = op.minModRevision;
  if (op.byModRevision !== undefined) {
    out.sort_target = 'Mod';
    out.sort_order = op.byModRevision === 'ascend' ? 'Ascend' : 'Descend';
  }
  return out;
}

function requestOp(op: Op): Etcd3.IRequestOp {
  switch (op.type) {
    case 'range':
      return { request_range: rangeRequest(op) };
    case 'put': {
      const put: Etcd3.IPutRequest = { key: bytes(op.key), value: op.value };
      if (op.lease !== undefined && op.lease !== '0') put.lease = op.lease;
      return { request_put: put };
    }
    case 'delete': {
      const del: Etcd3.IDeleteRangeRequest = { key: bytes(op.key) };
      if (op.end !== undefined) del.range_end = bytes(op.end);
      return { request_delete_range: del };
    }
  }
}

function rangeResult(res: Etcd3.IRangeResponse): RangeResult {
  return { type: 'range', kvs: res.kvs.map(keyValue), count: Number(res.count), more: res.more };
}

function opResult(op: Op, res: Etcd3.IResponseOp | undefined): OpResult {
  switch (op.type) {
    case 'range':
      if (res?.response_range === undefined) throw new Error('etcd answered a range op without a range response');
      return rangeResult(res.response_range);
    case 'put':
      return { type: 'put' };
    case 'delete':
      return { type: 'delete', deleted: Number(res?.response_delete_range.deleted ?? 0) };
  }
}

const NEVER = new AbortController().signal;
/** How long a call keeps being tried while it is not sent or etcd answers "no leader" (nothing was applied). */
const NO_LEADER_PATIENCE_MS = 10_000;

/**
 * Tries a call on up to three members (the pool moves to the next one), pausing a little between; while every
 * member answers "no leader" (an election, often seconds long after a partition heals), or the pool's draw of
 * members met only failing ones, it keeps trying.
 */
function retrying(lib: Lib): Policy {
  const policy = {
    execute: async (fn: (context: { signal: AbortSignal; attempt: number }) => unknown) => {
      const started = Date.now();
      for (let attempt = 0; ; attempt++) {
        try {
          return await fn({ signal: NEVER, attempt });
        } catch (error) {
          if (!(error instanceof Error) || !lib.isRecoverableError(error)) throw error;
          const unsent = wasNotSent(error) && Date.now() - started < NO_LEADER_PATIENCE_MS;
          if (attempt >= 2 && !unsent) throw error;
          await new Promise((resolve) => setTimeout(resolve, unsent ? 200 : 50 * 4 ** Math.min(attempt, 2)));
        }
      }
    },
  };
  return policy as unknown as Policy;
}

/**
 * etcd's `hasleader` metadata on every call: a member without a leader refuses a new call at once ("etcdserver:
 * no leader") instead of holding it until its request timeout, and cancels a watch or keep-alive stream it
 * holds once it has been without one for a few election timeouts. (An interceptor the shape grpc-js calls;
 * kvmq does not load grpc-js itself.)
 */
function requireLeaderCall(options: InterceptorOptions, nextCall: NextCall): ReturnType<NextCall> {
  const call = nextCall(options);
  const wrapped: ReturnType<NextCall> = {
    start: (metadata, listener) => {
      metadata.set('hasleader', 'true');
      call.start(metadata, listener);
    },
    cancelWithStatus: (status, details) => call.cancelWithStatus(status, details),
    getPeer: () => call.getPeer(),
    sendMessageWithContext: (context, message) => call.sendMessageWithContext(context, message),
    sendMessage: (message) => call.sendMessage(message),
    startRead: () => call.startRead(),
    halfClose: () => call.halfClose(),
    getAuthContext: () => call.getAuthContext(),
  };
  return wrapped;
}
// grpc-js's type names its own class as an interceptor's result; any object with the call's methods works.
const requireLeader = requireLeaderCall as unknown as Interceptor;

/** A client on one member only, for leader checks: no retries, no failover. */
function probeClient(lib: Lib, options: EtcdOptions, host: string): Etcd3.Etcd3 {
  const direct = { execute: (fn: (context: { signal: AbortSignal }) => unknown) => fn({ signal: NEVER }) };
  return new lib.Etcd3({
    hosts: [host],
    ...connectionOptions(options),
    faultHandling: { host: () => direct as unknown as Policy, global: direct as unknown as Policy },
  });
}

/** What every client of the store's URL shares: credentials, TLS, dial timeout. */
function connectionOptions(options: EtcdOptions): Partial<Etcd3.IOptions> {
  return {
    ...(options.auth === null ? {} : { auth: { username: options.auth.user, password: options.auth.password } }),
    ...(options.tls === null ? {} : { credentials: options.tls }),
    dialTimeout: 5000,
  };
}

/**
 * One watch on its own gRPC stream (etcd3's shared watch manager can lose
 * track of its watchers across reconnections). After a disconnection it
 * resumes right after the last revision it delivered; when that revision was
 * compacted, or the server cancels it, the owner is told to read again.
 */
class StreamWatch implements Watch {
  private stream: Etcd3.IDuplexStream<Etcd3.IWatchRequest, Etcd3.IWatchResponse> | null = null;
  private next: number;
  private canceled = false;
  private failures = 0;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly client: Etcd3.Etcd3,
    private readonly request: WatchRequest,
    private readonly handler: WatchHandler,
  ) {
    this.next = request.startRevision;
    void this.open();
  }

  private async open(): Promise<void> {
    this.timer = null;
    if (this.canceled) return;
    let stream: Etcd3.IDuplexStream<Etcd3.IWatchRequest, Etcd3.IWatchResponse>;
    try {
      stream = await this.client.watchClient.watch();
    } catch {
      this.retry();
      return;
    }
    if (this.isCanceled()) {
      closeStream(stream);
      return;
    }
    this.stream = stream;
    stream.on('data', (res) => this.onResponse(stream, res));
    stream.on('error', (error: Error & { code?: unknown }) => this.lost(stream, error));
    stream.on('end', () => this.lost(stream, null));
    stream.write({
      create_request: {
        key: bytes(this.request.key),
        ...(this.request.end === undefined ? {} : { range_end: bytes(this.request.end) }),
        start_revision: this.next,
        prev_kv: this.request.prevKv === true,
      },
    });
  }

  private onResponse(
    stream: Etcd3.IDuplexStream<Etcd3.IWatchRequest, Etcd3.IWatchResponse>,
    res: Etcd3.IWatchResponse,
  ): void {
    if (this.stream !== stream || this.canceled) return;
    if (res.canceled) {
      this.stream = null;
      closeStream(stream);
      this.canceled = true;
      const compacted = Number(res.compact_revision) > 0;
      this.handler.broken(
        new Error(
          compacted
            ? `history before revision ${res.compact_revision} was compacted`
            : `canceled: ${res.cancel_reason}`,
        ),
      );
      return;
    }
    this.failures = 0;
    if (res.created) return;
    const events: WatchEvent[] = res.events.map((event) => ({
      type: event.type === 'Delete' ? 'delete' : 'put',
      kv: keyValue(event.kv),
      prevKv: (event.prev_kv as Etcd3.IKeyValue | null | undefined) == null ? null : keyValue(event.prev_kv),
    }));
    const last = events.at(-1);
    // An empty response is a progress notice, sent only to watchers that are caught up.
    this.next = last === undefined ? Math.max(this.next, Number(res.header.revision) + 1) : last.kv.modRevision + 1;
    if (events.length > 0) this.handler.events(events);
  }

  private isCanceled(): boolean {
    return this.canceled;
  }

  private lost(
    stream: Etcd3.IDuplexStream<Etcd3.IWatchRequest, Etcd3.IWatchResponse>,
    error: (Error & { code?: unknown }) | null,
  ): void {
    if (this.stream !== stream) return;
    this.stream = null;
    closeStream(stream);
    if (error !== null && typeof error.code === 'number' && !TRANSIENT_STREAM_CODES.has(error.code)) {
      // Asking again from the same revision would fail the same way: the owner reads the state afresh instead.
      this.canceled = true;
      this.handler.broken(new Error(`the watch failed: ${error.message}`));
      return;
    }
    this.retry();
  }

  private retry(): void {
    if (this.canceled || this.timer !== null) return;
    this.failures += 1;
    const delay = Math.min(5000, 50 * 2 ** Math.min(this.failures, 7));
    this.timer = setTimeout(() => void this.open(), delay);
  }

  cancel(): Promise<void> {
    this.canceled = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    const stream = this.stream;
    this.stream = null;
    if (stream !== null) closeStream(stream);
    return Promise.resolve();
  }
}

export class Etcd3Kv implements Kv {
  readonly session: EtcdSession;
  private readonly members: EtcdMembers;
  private readonly client: Etcd3.Etcd3;
  private readonly watches = new Set<Watch>();
  private readonly compare: (c: Compare) => Etcd3.ICompare;

  constructor(
    private readonly lib: Lib,
    private readonly options: EtcdOptions,
  ) {
    const hosts = options.hosts.map((host) => `${options.tls === null ? 'http' : 'https'}://${host}`);
    this.members = new EtcdMembers(lib, hosts, (host) => probeClient(lib, options, host));
    const interceptors = [requireLeader];
    this.client = new lib.Etcd3({
      hosts,
      ...connectionOptions(options),
      defaultCallOptions: (context) =>
        context.isStream ? { interceptors } : { interceptors, deadline: Date.now() + CALL_DEADLINE_MS },
      grpcOptions: { 'grpc.max_receive_message_length': MAX_RECEIVE_BYTES },
      faultHandling: { host: (host) => this.members.policy(host), global: retrying(lib) },
    });
    this.session = new EtcdSession(this.client, this.members, Math.ceil(options.leaseTtlMs / 1000), (e) =>
      this.translate(e),
    );
    this.compare = compareWith(lib);
  }

  translate(error: unknown): Error {
    return translateEtcdError(error, this.lib, this.options.hosts.join(','));
  }

  async range(op: Omit<RangeOp, 'type'>): Promise<RangeResult & { readonly revision: number }> {
    try {
      const res = await this.client.kv.range(rangeRequest(op));
      return { ...rangeResult(res), revision: Number(res.header.revision) };
    } catch (error) {
      throw this.translate(error);
    }
  }

  async txn(request: TxnRequest): Promise<TxnResult> {
    const failure = request.failure ?? [];
    try {
      const res = await this.client.kv.txn({
        compare: request.compare.map(this.compare),
        success: request.success.map(requestOp),
        failure: failure.map(requestOp),
      });
      const ops = res.succeeded ? request.success : failure;
      return {
        succeeded: res.succeeded,
        revision: Number(res.header.revision),
        responses: ops.map((op, i) => opResult(op, res.responses[i])),
      };
    } catch (error) {
      throw this.translate(error);
    }
  }

  watch(request: WatchRequest, handler: WatchHandler): Watch {
    const watch = new StreamWatch(this.client, request, handler);
    this.watches.add(watch);
    return {
      cancel: async () => {
        this.watches.delete(watch);
        await watch.cancel();
      },
    };
  }

  async close(): Promise<void> {
    await Promise.all([...this.watches].map((w) => w.cancel()));
    this.watches.clear();
    await this.session.close();
    this.members.close();
    this.client.close();
  }
}
