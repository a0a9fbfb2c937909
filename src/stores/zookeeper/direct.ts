/**
 * Requests kvmq encodes itself, on node-zookeeper-client's connection:
 *
 * - multiRead (opcode 22, ZooKeeper 3.6+): getData operations executed in
 *   order, each with its own result. The server's cost is mostly per request,
 *   so reading a batch of messages' `state` and `data` this way costs it (and
 *   the client) far less than a getData each. The client has no multiRead.
 * - multi (opcode 14): the client has it, but builds every operation through
 *   its generic record layer, the largest share of kvmq's CPU time under
 *   load; encoded here directly, the same request costs a fraction of that.
 *
 * The replies are taken out before the client parses replies (frames.ts).
 * Their xids are far from the client's own, which count up from 0. When the
 * server does not know multiRead, reads go back to one getData each for the
 * rest of the session.
 */
import type { Socket } from 'node:net';
import { StoreUnavailableError } from '../../model/errors.js';
import { ZkCode, ZkError } from './zk-error.js';

const OP_MULTI = 14;
const OP_MULTI_READ = 22;
const OP_CREATE = 1;
const OP_DELETE = 2;
const OP_GET_DATA = 4;
const OP_SET_DATA = 5;
const OP_CHECK = 13;
const OP_ERROR = -1;
// ConnectionManager's state once the session handshake is done.
const CONNECTED = 2;
const FIRST_XID = 0x40000000;
// Offset of `version` in a Stat: czxid, mzxid, ctime and mtime (8 bytes each) come first.
const STAT_VERSION_OFFSET = 32;
const STAT_BYTES = 68;

/** A node's data and version, or null when it does not exist. */
export type ReadResult = { readonly data: Buffer; readonly version: number } | null;

interface Manager {
  state?: unknown;
  socket?: unknown;
  /** Requests the client holds back (connecting, or the socket full): ours must not overtake them. */
  packetQueue?: { queue?: unknown[] };
}

/** A multi's operation, paths relative to the chroot; `flags`: 0 persistent, 1 ephemeral, 2 sequential. */
export type DirectOp =
  { readonly op: 'create'; readonly path: string; readonly data: Buffer; readonly flags: number } | VersionedOp;

/** A multi's operations other than create, the same for kvmq's callers as on the wire. */
export type VersionedOp =
  | { readonly op: 'set'; readonly path: string; readonly data: Buffer; readonly version: number }
  | { readonly op: 'remove'; readonly path: string; readonly version: number }
  | { readonly op: 'check'; readonly path: string; readonly version: number };

/** A multi's result per operation: the created path for creates, the new version for sets. */
export interface MultiResult {
  readonly path?: string;
  readonly version?: number;
}

/** Per operation: the created path (creates), the new version (sets), or the error code of a failed multi. */
export interface DirectResult extends MultiResult {
  readonly err: number;
}

/** The ACL given to every node a multi creates, as ZooKeeper encodes it. */
export interface EncodedAcl {
  readonly perms: number;
  readonly scheme: string;
  readonly id: string;
}

interface Pending {
  readonly what: string;
  readonly socket: Socket;
  /** Parses the reply frame; throws a ZkError for a failed request. */
  readonly parse: (frame: Buffer, err: number) => unknown;
  readonly resolve: (value: never) => void;
  readonly reject: (error: Error) => void;
  readonly timer: NodeJS.Timeout;
}

export class DirectRequests {
  /** False once the server refused a multiRead: reads go one by one (multis are not affected). */
  supported = true;
  private nextXid = FIRST_XID;
  private corked = false;
  private readonly pending = new Map<number, Pending>();
  private readonly watched = new WeakSet<Socket>();

  constructor(
    private readonly manager: Manager,
    private readonly chroot: string,
    private readonly timeoutMs: number,
    private readonly hosts: string,
  ) {}

  /** True when a request can go now: the session is connected on a socket. */
  ready(): boolean {
    const socket = this.manager.socket as Partial<Socket> | undefined;
    return (
      this.manager.state === CONNECTED &&
      typeof socket?.write === 'function' &&
      (this.manager.packetQueue?.queue?.length ?? 0) === 0
    );
  }

  /**
   * The client writes every request to its socket at once, a system call
   * each; corked until the current burst of callbacks ends, the requests made
   * together (the client's and these) leave in one write.
   */
  coalesceWrites(): void {
    const socket = this.manager.socket as Partial<Socket> | undefined;
    if (this.corked || typeof socket?.cork !== 'function' || typeof socket.uncork !== 'function') return;
    socket.cork();
    this.corked = true;
    process.nextTick(() => {
      this.corked = false;
      socket.uncork?.();
    });
  }

  /** Reads the paths (relative to the chroot) in one request. */
  read(paths: readonly string[]): Promise<ReadResult[]> {
    return this.send(
      (xid) =>
        encodeRead(
          xid,
          paths.map((p) => this.full(p)),
        ),
      (frame, err) => {
        if (err !== 0) {
          // An old server does not know the request: reads go one by one from now on.
          if (err === ZkCode.Unimplemented || err === ZkCode.BadArguments) this.supported = false;
          throw new ZkError(err, 'MULTI_READ', paths[0] ?? '');
        }
        return decodeReads(frame, paths);
      },
      'a read',
    );
  }

  /** One atomic multi. Resolves with a result per operation, also when it failed (see DirectResult.err). */
  multi(ops: readonly DirectOp[], acl: readonly EncodedAcl[]): Promise<DirectResult[]> {
    return this.send(
      (xid) => encodeMulti(xid, ops, acl, (p) => this.full(p)),
      (frame) => decodeMulti(frame, ops.length, (p) => this.relative(p)),
      'a write; it may or may not have been applied',
    );
  }

  private send<T>(encode: (xid: number) => Buffer, parse: (frame: Buffer, err: number) => T, what: string): Promise<T> {
    const socket = this.manager.socket as Socket;
    const xid = this.nextXid;
    this.nextXid = this.nextXid >= 0x7ffffff0 ? FIRST_XID : this.nextXid + 1;
    this.watchClose(socket);
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(xid);
        reject(
          new StoreUnavailableError(
            `ZooKeeper at ${this.hosts} did not answer ${what} within ${this.timeoutMs} ms; ` +
              'check that the ensemble is up and reachable',
          ),
        );
      }, this.timeoutMs);
      this.pending.set(xid, { what, socket, parse, resolve, reject, timer });
      socket.write(encode(xid));
    });
  }

  /** Called with each whole reply frame; true when it answered one of these requests (the client never sees it). */
  take(frame: Buffer): boolean {
    if (frame.length < 20) return false;
    const xid = frame.readInt32BE(4);
    const request = this.pending.get(xid);
    if (request === undefined) return false;
    this.pending.delete(xid);
    clearTimeout(request.timer);
    try {
      request.resolve(request.parse(frame, frame.readInt32BE(16)) as never);
    } catch (error) {
      request.reject(error instanceof Error ? error : new Error(String(error)));
    }
    return true;
  }

  private full(path: string): string {
    if (this.chroot === '' || this.chroot === '/') return path;
    return path === '/' ? this.chroot : `${this.chroot}${path}`;
  }

  private relative(path: string): string {
    if (this.chroot === '' || this.chroot === '/' || !path.startsWith(this.chroot)) return path;
    return path.length === this.chroot.length ? '/' : path.slice(this.chroot.length);
  }

  /** A connection that closes takes its unanswered requests with it. */
  private watchClose(socket: Socket): void {
    if (this.watched.has(socket)) return;
    this.watched.add(socket);
    socket.once('close', () => {
      for (const [xid, request] of this.pending) {
        if (request.socket !== socket) continue;
        this.pending.delete(xid);
        clearTimeout(request.timer);
        request.reject(
          new StoreUnavailableError(`lost the connection to ZooKeeper at ${this.hosts} during ${request.what}`),
        );
      }
    });
  }
}

function encodeRead(xid: number, paths: readonly string[]): Buffer {
  const encoded = paths.map((p) => Buffer.from(p, 'utf8'));
  // length, xid, type; per op a header (type, done, err) and the request (path, watch); the closing header.
  const size = 4 + 4 + 4 + encoded.reduce((sum, p) => sum + 9 + 4 + p.length + 1, 0) + 9;
  const out = Buffer.allocUnsafe(size);
  let at = out.writeInt32BE(size - 4, 0);
  at = out.writeInt32BE(xid, at);
  at = out.writeInt32BE(OP_MULTI_READ, at);
  for (const path of encoded) {
    at = out.writeInt32BE(OP_GET_DATA, at);
    at = out.writeUInt8(0, at);
    at = out.writeInt32BE(-1, at);
    at = out.writeInt32BE(path.length, at);
    at += path.copy(out, at);
    at = out.writeUInt8(0, at);
  }
  at = out.writeInt32BE(-1, at);
  at = out.writeUInt8(1, at);
  out.writeInt32BE(-1, at);
  return out;
}

/** The results after the reply header (length, xid, zxid, err): one per path, in order. */
function decodeReads(frame: Buffer, paths: readonly string[]): ReadResult[] {
  const results: ReadResult[] = [];
  let at = 20;
  for (;;) {
    const type = frame.readInt32BE(at);
    const done = frame.readUInt8(at + 4) !== 0;
    at += 9;
    if (done) break;
    const path = paths[results.length] ?? '';
    if (type === OP_GET_DATA) {
      const length = frame.readInt32BE(at);
      at += 4;
      const data = length < 0 ? Buffer.alloc(0) : Buffer.from(frame.subarray(at, at + length));
      at += Math.max(0, length);
      results.push({ data, version: frame.readInt32BE(at + STAT_VERSION_OFFSET) });
      at += STAT_BYTES;
    } else if (type === OP_ERROR) {
      const code = frame.readInt32BE(at);
      at += 4;
      if (code !== ZkCode.NoNode) throw new ZkError(code, 'GET_DATA', path);
      results.push(null);
    } else {
      throw new ZkError(ZkCode.BadArguments, `unexpected multiRead result type ${type}`, path);
    }
  }
  if (results.length !== paths.length) {
    throw new StoreUnavailableError(`ZooKeeper answered ${results.length} of ${paths.length} reads in one request`);
  }
  return results;
}

/** A growing buffer for one request. */
class Writer {
  private buf = Buffer.allocUnsafe(4096);
  private at = 0;

  private room(n: number): void {
    if (this.at + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.at + n));
    this.buf.copy(next, 0, 0, this.at);
    this.buf = next;
  }

  int(v: number): void {
    this.room(4);
    this.at = this.buf.writeInt32BE(v, this.at);
  }

  bool(v: boolean): void {
    this.room(1);
    this.at = this.buf.writeUInt8(v ? 1 : 0, this.at);
  }

  string(v: string): void {
    const n = Buffer.byteLength(v);
    this.room(4 + n);
    this.at = this.buf.writeInt32BE(n, this.at);
    this.at += this.buf.write(v, this.at, 'utf8');
  }

  bytes(v: Buffer): void {
    this.room(4 + v.length);
    this.at = this.buf.writeInt32BE(v.length, this.at);
    this.at += v.copy(this.buf, this.at);
  }

  /** The request, its length in front. */
  done(): Buffer {
    const out = this.buf.subarray(0, this.at);
    out.writeInt32BE(this.at - 4, 0);
    return out;
  }
}

const OP_CODES = { create: OP_CREATE, set: OP_SET_DATA, remove: OP_DELETE, check: OP_CHECK } as const;

function encodeMulti(
  xid: number,
  ops: readonly DirectOp[],
  acl: readonly EncodedAcl[],
  full: (path: string) => string,
): Buffer {
  const w = new Writer();
  w.int(0); // the length, written by done()
  w.int(xid);
  w.int(OP_MULTI);
  for (const op of ops) {
    w.int(OP_CODES[op.op]);
    w.bool(false);
    w.int(-1);
    w.string(full(op.path));
    switch (op.op) {
      case 'create':
        w.bytes(op.data);
        w.int(acl.length);
        for (const a of acl) {
          w.int(a.perms);
          w.string(a.scheme);
          w.string(a.id);
        }
        w.int(op.flags);
        break;
      case 'set':
        w.bytes(op.data);
        w.int(op.version);
        break;
      case 'remove':
      case 'check':
        w.int(op.version);
        break;
    }
  }
  w.int(-1);
  w.bool(true);
  w.int(-1);
  return w.done();
}

/** A multi's results: on success one per operation; on failure an error code for each. */
function decodeMulti(frame: Buffer, count: number, relative: (path: string) => string): DirectResult[] {
  const results: DirectResult[] = [];
  let at = 20;
  while (at + 9 <= frame.length) {
    const type = frame.readInt32BE(at);
    const done = frame.readUInt8(at + 4) !== 0;
    at += 9;
    if (done) break;
    switch (type) {
      case OP_CREATE: {
        const length = frame.readInt32BE(at);
        at += 4;
        results.push({ err: 0, path: relative(frame.toString('utf8', at, at + length)) });
        at += length;
        break;
      }
      case OP_SET_DATA:
        results.push({ err: 0, version: frame.readInt32BE(at + STAT_VERSION_OFFSET) });
        at += STAT_BYTES;
        break;
      case OP_DELETE:
      case OP_CHECK:
        results.push({ err: 0 });
        break;
      case OP_ERROR:
        results.push({ err: frame.readInt32BE(at) });
        at += 4;
        break;
      default:
        throw new ZkError(ZkCode.BadArguments, `unexpected multi result type ${type}`, '');
    }
  }
  if (results.length !== count) {
    // Refused as a whole, with no result per operation: its code stands for every one.
    const err = frame.readInt32BE(16);
    if (results.length === 0 && err !== 0) return Array.from({ length: count }, () => ({ err }));
    throw new StoreUnavailableError(`ZooKeeper answered ${results.length} of ${count} operations of a multi`);
  }
  return results;
}
