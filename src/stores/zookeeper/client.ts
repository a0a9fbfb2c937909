/**
 * A small typed promise layer over node-zookeeper-client, with what that
 * client leaves out:
 * - session expiry detected here: the client only learns of it when a server
 *   answers again (its issue #20), so a disconnection longer than the session
 *   timeout counts as expiry, and a fresh session replaces the dead one;
 * - a time limit on every request (the client queues them forever while
 *   disconnected);
 * - `multi` with exact versions (its Transaction turns version 0 into -1) and
 *   the index of the operation that failed.
 */
import type * as Zk from 'node-zookeeper-client';
import { requireDriver } from '../contract/driver.js';
import { StoreUnavailableError } from '../../model/errors.js';
import { parseWholeFrames } from './frames.js';
import {
  DirectRequests,
  type DirectOp,
  type EncodedAcl,
  type MultiResult,
  type ReadResult,
  type VersionedOp,
} from './direct.js';
import { SessionHeard } from './heard.js';

type ZkModule = typeof Zk;
let zkModule: ZkModule | null = null;

/** node-zookeeper-client is CommonJS; loaded only when a zookeeper:// store is opened. */
function zk(): ZkModule {
  zkModule ??= requireDriver('zookeeper') as ZkModule;
  return zkModule;
}

import { TRANSIENT, ZkCode, ZkError, isZkError } from './zk-error.js';

export { ZkCode, ZkError, isZkError } from './zk-error.js';

export interface ZkStat {
  readonly version: number;
  readonly cversion: number;
  readonly numChildren: number;
  readonly dataLength: number;
  /** The owning session's id in hex; '0000000000000000' for persistent nodes. */
  readonly ephemeralOwner: string;
  /** The zxid of the node's last data change, in hex: a node removed and made again never repeats one. */
  readonly mzxid: string;
}

export type CreateKind = 'persistent' | 'sequential' | 'ephemeral';

export type ZkOp =
  { readonly op: 'create'; readonly path: string; readonly data?: Buffer; readonly kind?: CreateKind } | VersionedOp;

/** A multi's result per operation: the created path for creates, the new version for sets. */
export type ZkOpResult = MultiResult;

export interface ZkOptions {
  /** host:port,host:port */
  readonly hosts: string;
  /** '' for none, else '/a/b'. */
  readonly chroot: string;
  /** user:password for the digest scheme, or null. */
  readonly auth: string | null;
  readonly sessionTimeoutMs: number;
  /** A request with no answer after this long fails (the connection is presumed lost). */
  readonly requestTimeoutMs: number;
}

interface RawStat {
  version: number;
  cversion: number;
  numChildren: number;
  dataLength: number;
  ephemeralOwner: Buffer;
  mzxid: Buffer;
}

type Callback<T> = (error: Error | Zk.Exception | null, value: T) => void;

const MODES: Record<CreateKind, number> = { persistent: 0, sequential: 2, ephemeral: 1 };

/** What every request of one session needs: the raw client and the session's number. */
interface Live {
  readonly client: Zk.Client;
  /** Requests kvmq encodes itself (several getData in one, and multis), on this client's connection. */
  readonly direct: DirectRequests | null;
  readonly epoch: number;
  readonly sessionId: string;
  /** When the server last heard from this session, provably. */
  readonly heard: SessionHeard;
}

export class ZkSession {
  /** Increases whenever a new session replaces an expired one: ephemerals and watches of older epochs are gone. */
  epoch = 0;
  /**
   * Sent so far, for benchmarks and tests: reads (each path counts), the requests that carried them,
   * and write operations (each one of a multi counts); `direct`: the requests kvmq encoded itself
   * (direct.ts), which fall back silently to the client's own should its internals change.
   */
  readonly sent = { reads: 0, readRequests: 0, writes: 0, direct: 0 };
  private live: Promise<Live>;
  private current: Live | null = null;
  private readonly sessionListeners = new Set<(epoch: number) => void>();
  private expiryTimer: NodeJS.Timeout | null = null;
  private closed = false;
  /** getMany calls of this tick, sent together. */
  private reads: PendingRead[] = [];

  private constructor(private readonly options: ZkOptions) {
    this.live = this.openSession();
  }

  /** Connects; fails with StoreUnavailableError when no server answers within the session timeout. */
  static async open(options: ZkOptions): Promise<ZkSession> {
    const session = new ZkSession(options);
    try {
      await session.live;
    } catch (error) {
      session.close();
      throw error;
    }
    return session;
  }

  /**
   * The performance.now() before which the server cannot have ended the live session: the send time of the last
   * request it answered plus the negotiated timeout. -Infinity while there is no session.
   */
  liveUntil(): number {
    const live = this.current;
    return live === null ? -Infinity : live.heard.heardAt + live.client.getSessionTimeout();
  }

  /** The id of the live session (hex), or '' while none is established. */
  get sessionId(): string {
    return this.current?.sessionId ?? '';
  }

  /** Open nodes without credentials; with them, nodes only this user may read or change (CREATOR_ALL). */
  get aclForCreates(): Zk.ACL[] {
    const acls = zk().ACL as unknown as { OPEN_ACL_UNSAFE: Zk.ACL[]; CREATOR_ALL_ACL: Zk.ACL[] };
    return this.options.auth === null ? acls.OPEN_ACL_UNSAFE : acls.CREATOR_ALL_ACL;
  }

  /** The live session's id and password (what ZooKeeper needs to resume it), or null. */
  credentials(): { id: Buffer; password: Buffer } | null {
    const client = this.current?.client;
    return client === undefined ? null : { id: client.getSessionId(), password: client.getSessionPassword() };
  }

  /** Called with the new epoch each time a fresh session replaces an expired one. */
  onNewSession(listener: (epoch: number) => void): () => void {
    this.sessionListeners.add(listener);
    return () => this.sessionListeners.delete(listener);
  }

  async get(path: string, watch?: () => void): Promise<{ data: Buffer; stat: ZkStat }> {
    const { client } = await this.live;
    this.sent.reads += 1;
    this.sent.readRequests += 1;
    return this.request(path, (cb: Callback<{ data: Buffer; stat: ZkStat }>) => {
      const done = (error: Error | Zk.Exception | null, data: Buffer | undefined, stat: RawStat | undefined) =>
        cb(error, error ? (null as never) : { data: data ?? Buffer.alloc(0), stat: toStat(stat) });
      if (watch === undefined) client.getData(path, done as never);
      else client.getData(path, () => watch(), done as never);
    });
  }

  /**
   * The data and version of each path (null where there is none), read in
   * order. Reads asked for in the same tick travel together in one request
   * where the server takes several (ZooKeeper 3.6+), else one each.
   */
  async getMany(paths: readonly string[]): Promise<ReadResult[]> {
    const live = await this.live;
    if (!readsTogether(live.direct)) return this.getEach(paths);
    return new Promise((resolve, reject) => {
      this.reads.push({ paths, resolve, reject });
      if (this.reads.length === 1) process.nextTick(() => this.sendReads(live));
    });
  }

  private async getEach(paths: readonly string[]): Promise<ReadResult[]> {
    return Promise.all(
      paths.map(async (path) => {
        try {
          const { data, stat } = await this.get(path);
          return { data, version: stat.version };
        } catch (error) {
          if (isZkError(error, ZkCode.NoNode)) return null;
          throw error;
        }
      }),
    );
  }

  /** The reads gathered this tick, in requests of at most MAX_READS_PER_REQUEST paths. */
  private sendReads(live: Live): void {
    const waiting = this.reads;
    this.reads = [];
    while (waiting.length > 0) {
      const batch: PendingRead[] = [];
      let count = 0;
      while (
        waiting.length > 0 &&
        (batch.length === 0 || count + (waiting[0]?.paths.length ?? 0) <= MAX_READS_PER_REQUEST)
      ) {
        const next = waiting.shift() as PendingRead;
        batch.push(next);
        count += next.paths.length;
      }
      void this.sendBatch(live, batch);
    }
  }

  private async sendBatch(live: Live, batch: readonly PendingRead[]): Promise<void> {
    const reader = live.direct;
    try {
      if (this.closed) throw new StoreUnavailableError('the ZooKeeper store is closed');
      if (reader === null || !readsTogether(reader)) throw new FallBack();
      const paths = batch.flatMap((r) => r.paths);
      this.coalesceWrites();
      this.sent.reads += paths.length;
      this.sent.readRequests += 1;
      this.sent.direct += 1;
      const results = await reader.read(paths);
      let at = 0;
      for (const r of batch) {
        r.resolve(results.slice(at, at + r.paths.length));
        at += r.paths.length;
      }
    } catch (error) {
      // Not sent, or refused by a server without multiRead: one getData each.
      if (error instanceof FallBack || (reader !== null && !reader.supported)) {
        for (const r of batch) this.getEach(r.paths).then(r.resolve, r.reject);
        return;
      }
      const failure = error instanceof Error ? translate(error, batch[0]?.paths[0] ?? '', this.options.hosts) : error;
      for (const r of batch) r.reject(failure);
    }
  }

  /** The node's stat, or null when it does not exist. */
  async exists(path: string, watch?: () => void): Promise<ZkStat | null> {
    const { client } = await this.live;
    this.sent.reads += 1;
    this.sent.readRequests += 1;
    return this.request(path, (cb: Callback<ZkStat | null>) => {
      const done = (error: Error | Zk.Exception | null, stat: RawStat | undefined) =>
        cb(error, stat ? toStat(stat) : null);
      if (watch === undefined) client.exists(path, done as never);
      else client.exists(path, () => watch(), done as never);
    });
  }

  async children(path: string, watch?: () => void): Promise<{ children: string[]; stat: ZkStat }> {
    const { client } = await this.live;
    this.sent.reads += 1;
    this.sent.readRequests += 1;
    return this.request(path, (cb: Callback<{ children: string[]; stat: ZkStat }>) => {
      const done = (error: Error | Zk.Exception | null, children: string[] | undefined, stat: RawStat | undefined) =>
        cb(error, error ? (null as never) : { children: children ?? [], stat: toStat(stat) });
      if (watch === undefined) client.getChildren(path, done as never);
      else client.getChildren(path, () => watch(), done as never);
    });
  }

  /** The node's children's names; none when the node does not exist (yet). */
  async childrenIfAny(path: string): Promise<string[]> {
    try {
      return (await this.children(path)).children;
    } catch (error) {
      if (isZkError(error, ZkCode.NoNode)) return [];
      throw error;
    }
  }

  async create(path: string, data: Buffer = Buffer.alloc(0), kind: CreateKind = 'persistent'): Promise<string> {
    const { client } = await this.live;
    this.sent.writes += 1;
    return this.request(path, (cb: Callback<string>) =>
      client.create(path, data, this.aclForCreates, MODES[kind], cb as never),
    );
  }

  /** Creates the node unless it exists; true when this call created it. */
  async ensure(path: string, data: Buffer = Buffer.alloc(0)): Promise<boolean> {
    try {
      await this.create(path, data);
      return true;
    } catch (error) {
      if (isZkError(error, ZkCode.NodeExists)) return false;
      throw error;
    }
  }

  async set(path: string, data: Buffer, version: number): Promise<ZkStat> {
    const { client } = await this.live;
    this.sent.writes += 1;
    return this.request(path, (cb: Callback<ZkStat>) =>
      client.setData(path, data, version, ((error: Error | null, stat: RawStat) =>
        cb(error, error ? (null as never) : toStat(stat))) as never),
    );
  }

  async remove(path: string, version: number): Promise<void> {
    const { client } = await this.live;
    this.sent.writes += 1;
    await this.request(path, (cb: Callback<undefined>) =>
      client.remove(path, version, (error) => cb(error, undefined)),
    );
  }

  /** One atomic multi. On failure throws the failing operation's ZkError, with its index. */
  async multi(ops: readonly ZkOp[]): Promise<ZkOpResult[]> {
    if (ops.length === 0) return [];
    const live = await this.live;
    this.sent.writes += ops.length;
    if (live.direct?.ready() === true) return this.directMulti(live.direct, ops);
    const tx = live.client.transaction() as Zk.Transaction & { ops: { version?: number }[] };
    for (const op of ops) {
      switch (op.op) {
        case 'create':
          tx.create(op.path, op.data ?? Buffer.alloc(0), this.aclForCreates, MODES[op.kind ?? 'persistent']);
          break;
        case 'set':
          tx.setData(op.path, op.data, op.version);
          break;
        case 'remove':
          tx.remove(op.path, op.version);
          break;
        case 'check':
          tx.check(op.path, op.version);
          break;
      }
      // The client's builder reads a version of 0 as "any" (-1); put the exact one back.
      const last = tx.ops[tx.ops.length - 1];
      if (op.op !== 'create' && last !== undefined) last.version = op.version;
    }
    const results = await this.request(ops[0]?.path ?? '/', (cb: Callback<RawResult[]>) =>
      tx.commit(((error: Error | Zk.Exception | null, raw: RawResult[] | undefined) => {
        if (error === null) return cb(null, raw ?? []);
        const index = failedOp(raw ?? []);
        if (isException(error) && index >= 0) {
          const failed = ops[index];
          return cb(new ZkError(error.getCode(), error.getName(), failed?.path ?? '', index), []);
        }
        cb(error, []);
      }) as never),
    );
    return results.map((r) => ({ path: r.path, version: r.stat?.version }));
  }

  /** A multi encoded by kvmq (see direct.ts): the same request and results as the client's. */
  private async directMulti(direct: DirectRequests, ops: readonly ZkOp[]): Promise<ZkOpResult[]> {
    if (this.closed) throw new StoreUnavailableError('the ZooKeeper store is closed');
    this.coalesceWrites();
    this.sent.direct += 1;
    let results;
    try {
      results = await direct.multi(ops.map(toDirectOp), this.encodedAcl());
    } catch (error) {
      throw error instanceof Error ? translate(error, ops[0]?.path ?? '', this.options.hosts) : error;
    }
    const index = failedOp(results);
    const failed = index >= 0 ? index : results.findIndex((r) => r.err !== 0);
    if (failed >= 0) {
      const code = results[failed]?.err ?? RUNTIME_INCONSISTENCY;
      const name = (zk().Exception as unknown as { create(code: number): Zk.Exception }).create(code).getName();
      throw translate(
        new ZkError(code, name, ops[failed]?.path ?? '', failed),
        ops[failed]?.path ?? '',
        this.options.hosts,
      );
    }
    return results.map((r) => ({ path: r.path, version: r.version }));
  }

  private encodedAcl(): EncodedAcl[] {
    return this.aclForCreates.map((acl) => {
      const a = acl as unknown as { permission: number; id: { scheme: string; id: string } };
      return { perms: a.permission, scheme: a.id.scheme, id: a.id.id };
    });
  }

  close(): void {
    this.closed = true;
    if (this.expiryTimer !== null) clearTimeout(this.expiryTimer);
    this.current?.client.close();
    this.current = null;
    this.live.catch(() => undefined);
  }

  /** Requests made together leave in one socket write (see DirectRequests.coalesceWrites). */
  private coalesceWrites(): void {
    this.current?.direct?.coalesceWrites();
  }

  /** Runs one request with a time limit; ZooKeeper errors become ZkErrors, lost connections StoreUnavailableError. */
  private request<T>(path: string, run: (cb: Callback<T>) => void): Promise<T> {
    if (this.closed) return Promise.reject(new StoreUnavailableError('the ZooKeeper store is closed'));
    this.coalesceWrites();
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(
          new StoreUnavailableError(
            `ZooKeeper at ${this.options.hosts} did not answer within ${this.options.requestTimeoutMs} ms; ` +
              'check that the ensemble is up and reachable',
          ),
        );
      }, this.options.requestTimeoutMs);
      try {
        run((error, value) => {
          clearTimeout(timer);
          if (error === null) resolve(value);
          else reject(translate(error, path, this.options.hosts));
        });
      } catch (error) {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error(String(error)));
      }
    });
  }

  private openSession(): Promise<Live> {
    const { hosts, chroot, auth, sessionTimeoutMs } = this.options;
    const client = zk().createClient(`${hosts}${chroot}`, { sessionTimeout: sessionTimeoutMs, spinDelay: 200 });
    if (auth !== null) client.addAuthInfo('digest', Buffer.from(auth));
    const manager = (client as unknown as { connectionManager?: object }).connectionManager;
    const direct =
      manager === undefined ? null : new DirectRequests(manager, chroot, this.options.requestTimeoutMs, hosts);
    const heard = new SessionHeard();
    if (manager !== undefined) heard.follow(manager);
    parseWholeFrames(client, (frame) => {
      heard.replied(frame);
      return direct?.take(frame) ?? false;
    });
    const epoch = ++this.epoch;
    const opened = new Promise<Live>((resolve, reject) => {
      const timer = setTimeout(() => {
        client.close();
        reject(
          new StoreUnavailableError(
            `cannot reach ZooKeeper at ${hosts} (no session within ${sessionTimeoutMs} ms); ` +
              'check the URL and that the ensemble is running',
          ),
        );
      }, sessionTimeoutMs);
      client.once('connected', () => {
        clearTimeout(timer);
        const live = { client, direct, epoch, sessionId: client.getSessionId().toString('hex'), heard };
        this.current = live;
        resolve(live);
      });
      client.on('state', (state: Zk.State) => this.onState(client, epoch, state));
    });
    client.connect();
    return opened;
  }

  private onState(client: Zk.Client, epoch: number, state: Zk.State): void {
    if (this.closed || this.current?.client !== client) return;
    const { State } = zk();
    if (state === State.SYNC_CONNECTED || state === State.CONNECTED_READ_ONLY) {
      if (this.expiryTimer !== null) clearTimeout(this.expiryTimer);
      this.expiryTimer = null;
    } else if (state === State.DISCONNECTED) {
      // The server drops the session once it has heard nothing for the timeout; so do we.
      this.expiryTimer ??= setTimeout(() => this.replace(client, epoch), client.getSessionTimeout());
    } else if (state === State.EXPIRED) {
      this.replace(client, epoch);
    }
  }

  /** The session is gone: open a new one; requests wait for it. */
  private replace(client: Zk.Client, epoch: number): void {
    if (this.closed || this.current?.client !== client || this.epoch !== epoch) return;
    if (this.expiryTimer !== null) clearTimeout(this.expiryTimer);
    this.expiryTimer = null;
    this.current = null;
    client.close();
    const reopen = async (): Promise<Live> => {
      for (;;) {
        if (this.closed) throw new StoreUnavailableError('the ZooKeeper store is closed');
        try {
          return await this.openSession();
        } catch {
          // Keep trying: requests meanwhile fail by their own time limit.
        }
      }
    };
    this.live = reopen();
    this.live.then(
      (live) => {
        for (const listener of this.sessionListeners) listener(live.epoch);
      },
      () => undefined,
    );
  }
}

// ZooKeeper's code for the operations of a failed multi after the one that failed.
const RUNTIME_INCONSISTENCY = -2;

/** The operation a failed multi failed on: it reports 0 for the operations before it and -2 for those after. */
function failedOp(results: readonly { err?: number }[]): number {
  return results.findIndex((r) => r.err !== undefined && r.err !== 0 && r.err !== RUNTIME_INCONSISTENCY);
}

/** Reads go together while the connection takes kvmq's requests and the server knows multiRead. */
function readsTogether(direct: DirectRequests | null): direct is DirectRequests {
  return direct !== null && direct.supported && direct.ready();
}

function toDirectOp(op: ZkOp): DirectOp {
  if (op.op !== 'create') return op;
  return { op: 'create', path: op.path, data: op.data ?? Buffer.alloc(0), flags: MODES[op.kind ?? 'persistent'] };
}

/** More reads than this in a tick go in several requests. */
const MAX_READS_PER_REQUEST = 256;

interface PendingRead {
  readonly paths: readonly string[];
  readonly resolve: (results: ReadResult[]) => void;
  readonly reject: (error: unknown) => void;
}

/** The reads could not go in one request: send them one by one. */
class FallBack extends Error {}

interface RawResult {
  type: number;
  err?: number;
  path?: string;
  stat?: RawStat;
}

function isException(error: unknown): error is Zk.Exception {
  return typeof (error as { getCode?: unknown }).getCode === 'function';
}

function translate(error: Error | Zk.Exception, path: string, hosts: string): Error {
  if (error instanceof ZkError) {
    return error.transient ? new StoreUnavailableError(transientMessage(error.code, hosts), error) : error;
  }
  if (isException(error)) {
    const code = error.getCode();
    if (TRANSIENT.has(code)) return new StoreUnavailableError(transientMessage(code, hosts), error);
    return new ZkError(code, error.getName(), path);
  }
  return error;
}

function transientMessage(code: number, hosts: string): string {
  if (code === ZkCode.SessionExpired) return `the ZooKeeper session expired (${hosts}); kvmq opens a new one`;
  return `lost the connection to ZooKeeper at ${hosts} during a request; it may or may not have been applied`;
}

function toStat(raw: RawStat | undefined): ZkStat {
  if (raw === undefined)
    return { version: -1, cversion: -1, numChildren: 0, dataLength: 0, ephemeralOwner: '', mzxid: '' };
  return {
    version: raw.version,
    cversion: raw.cversion,
    numChildren: raw.numChildren,
    dataLength: raw.dataLength,
    ephemeralOwner: raw.ephemeralOwner.toString('hex'),
    mzxid: raw.mzxid.toString('hex'),
  };
}
