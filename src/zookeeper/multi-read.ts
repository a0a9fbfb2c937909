/**
 * Several reads in one request. ZooKeeper 3.6+ answers a multiRead (opcode
 * 22): getData operations executed in order, each with its own result. The
 * server's cost is mostly per request, so reading a batch of messages' `state`
 * and `data` this way costs it (and the client) far less than a getData each.
 * node-zookeeper-client has no multiRead; kvmq writes the request on the
 * client's connection itself and takes the reply frame out before the client
 * parses replies (see frames.ts). Its xids are far from the client's own, which
 * count up from 0. When the server does not know the request, reads go back
 * to one getData each for the rest of the session.
 */
import type { Socket } from 'node:net';
import { StoreUnavailableError } from '../errors.js';
import { ZkCode, ZkError } from './zk-error.js';

const OP_MULTI_READ = 22;
const OP_GET_DATA = 4;
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

interface Pending {
  readonly paths: readonly string[];
  readonly socket: Socket;
  readonly resolve: (results: ReadResult[]) => void;
  readonly reject: (error: Error) => void;
  readonly timer: NodeJS.Timeout;
}

export class MultiReader {
  /** False once the server refused a multiRead: reads go one by one. */
  supported = true;
  private nextXid = FIRST_XID;
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
      this.supported &&
      this.manager.state === CONNECTED &&
      typeof socket?.write === 'function' &&
      (this.manager.packetQueue?.queue?.length ?? 0) === 0
    );
  }

  /** Reads the paths (relative to the chroot) in one request. */
  read(paths: readonly string[]): Promise<ReadResult[]> {
    const socket = this.manager.socket as Socket;
    const xid = this.nextXid;
    this.nextXid = this.nextXid >= 0x7ffffff0 ? FIRST_XID : this.nextXid + 1;
    this.watchClose(socket);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(xid);
        reject(
          new StoreUnavailableError(
            `ZooKeeper at ${this.hosts} did not answer a read within ${this.timeoutMs} ms; ` +
              'check that the ensemble is up and reachable',
          ),
        );
      }, this.timeoutMs);
      this.pending.set(xid, { paths, socket, resolve, reject, timer });
      socket.write(
        encodeRequest(
          xid,
          paths.map((p) => this.full(p)),
        ),
      );
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
    const err = frame.readInt32BE(16);
    if (err !== 0) {
      // An old server does not know the request: reads go one by one from now on.
      if (err === ZkCode.Unimplemented || err === ZkCode.BadArguments) this.supported = false;
      request.reject(new ZkError(err, 'MULTI_READ', request.paths[0] ?? ''));
      return true;
    }
    try {
      request.resolve(decodeResults(frame, request.paths));
    } catch (error) {
      request.reject(error instanceof Error ? error : new Error(String(error)));
    }
    return true;
  }

  private full(path: string): string {
    if (this.chroot === '' || this.chroot === '/') return path;
    return path === '/' ? this.chroot : `${this.chroot}${path}`;
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
          new StoreUnavailableError(`lost the connection to ZooKeeper at ${this.hosts} during a read; try again`),
        );
      }
    });
  }
}

function encodeRequest(xid: number, paths: readonly string[]): Buffer {
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
function decodeResults(frame: Buffer, paths: readonly string[]): ReadResult[] {
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
