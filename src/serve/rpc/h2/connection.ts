/**
 * One client connection of the server's own HTTP/2 transport for gRPC: the
 * frames a gRPC client sends (RFC 9113) parsed straight off the socket,
 * requests dispatched to the method table, and every frame produced while
 * the event loop works (replies of one group commit, events of one watch
 * notification) written in one socket write.
 *
 * It implements what gRPC over HTTP/2 uses and no more: no server push, no
 * priorities (accepted and ignored), no HTTP/1.1. Flow control is honoured
 * both ways; the server's receive windows are large and refilled as data
 * arrives, since requests are bounded by the message size limit.
 */
import type { Socket } from 'node:net';
import { gunzipSync, inflateSync } from 'node:zlib';
import { Code, EtcdError, messageTooLarge } from '../../errors.js';
import type { CallContext, Sink, StreamHandler } from '../method.js';
import type { ServedMethod } from '../table.js';
import { encodeHeaders, HpackDecoder, HpackError } from './hpack.js';
import { HuffmanError } from './huffman.js';

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

const DATA = 0x0;
const HEADERS = 0x1;
const PRIORITY = 0x2;
const RST_STREAM = 0x3;
const SETTINGS = 0x4;
const PUSH_PROMISE = 0x5;
const PING = 0x6;
const GOAWAY = 0x7;
const WINDOW_UPDATE = 0x8;
const CONTINUATION = 0x9;

const END_STREAM = 0x1;
const ACK = 0x1;
const END_HEADERS = 0x4;
const PADDED = 0x8;
const PRIORITY_FLAG = 0x20;

const NO_ERROR = 0x0;
const PROTOCOL_ERROR = 0x1;
const INTERNAL_ERROR = 0x2;
const FLOW_CONTROL_ERROR = 0x3;
const FRAME_SIZE_ERROR = 0x6;
const COMPRESSION_ERROR = 0x9;

const SETTINGS_HEADER_TABLE_SIZE = 0x1;
const SETTINGS_INITIAL_WINDOW_SIZE = 0x4;
const SETTINGS_MAX_FRAME_SIZE = 0x5;
const SETTINGS_MAX_HEADER_LIST_SIZE = 0x6;

/** The largest frame the server accepts (HTTP/2's default, which it does not raise). */
const MAX_FRAME = 16384;
const DEFAULT_WINDOW = 65535;
/** Receive windows the server grants: per stream, and for the connection. */
const STREAM_WINDOW = 1 << 20;
const CONNECTION_WINDOW = 16 << 20;
const MAX_HEADER_BLOCK = 64 * 1024;
const MAX_WINDOW = 2 ** 31 - 1;

const RESPONSE_HEADERS = encodeHeaders([
  [':status', '200'],
  ['content-type', 'application/grpc'],
]);
const OK_TRAILERS = encodeHeaders([['grpc-status', '0']]);

/** gRPC's grpc-message encoding: printable ASCII except '%' as is, everything else %-escaped UTF-8. */
function percentEncode(message: string): string {
  let out = '';
  for (const byte of Buffer.from(message, 'utf8')) {
    out +=
      byte >= 0x20 && byte <= 0x7e && byte !== 0x25
        ? String.fromCharCode(byte)
        : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

function trailersFor(error: EtcdError, withHeaders: boolean): Buffer {
  const fields: [string, string][] = withHeaders
    ? [
        [':status', '200'],
        ['content-type', 'application/grpc'],
      ]
    : [];
  fields.push(['grpc-status', String(error.code)]);
  fields.push(['grpc-message', percentEncode(error.message.slice(0, 4096))]);
  return encodeHeaders(fields);
}

function frameHeader(buf: Buffer, at: number, length: number, type: number, flags: number, stream: number): void {
  buf[at] = (length >>> 16) & 0xff;
  buf[at + 1] = (length >>> 8) & 0xff;
  buf[at + 2] = length & 0xff;
  buf[at + 3] = type;
  buf[at + 4] = flags;
  buf.writeUInt32BE(stream, at + 5);
}

function frame(type: number, flags: number, stream: number, payload: Buffer): Buffer {
  const buf = Buffer.allocUnsafe(9 + payload.length);
  frameHeader(buf, 0, payload.length, type, flags, stream);
  payload.copy(buf, 9);
  return buf;
}

class ConnectionError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

class Stream implements Sink {
  /** The method, once known (null for a request answered with an error at once). */
  method: ServedMethod | null = null;
  context: CallContext = { token: undefined };
  encoding = '';
  handler: StreamHandler | null = null;
  remoteClosed = false;
  localClosed = false;
  headersSent = false;
  /** Messages of a unary or server-streaming call, delivered at the client's END_STREAM. */
  readonly messages: Buffer[] = [];
  // Inbound message reassembly.
  private chunks: Buffer[] = [];
  private buffered = 0;
  recvUnacked = 0;
  // Outbound data not yet within the flow-control windows, and the trailers after it.
  sendWindow: number;
  readonly queue: Buffer[] = [];
  trailers: Buffer | null = null;

  constructor(
    readonly id: number,
    private readonly conn: Connection,
    initialWindow: number,
  ) {
    this.sendWindow = initialWindow;
  }

  /** Adds DATA payload; returns the complete gRPC messages it finishes. */
  receive(data: Buffer, limit: number): Buffer[] | EtcdError {
    if (data.length === 0) return [];
    this.chunks.push(data);
    this.buffered += data.length;
    const messages: Buffer[] = [];
    for (;;) {
      if (this.buffered < 5) return messages;
      const all = this.chunks.length === 1 ? (this.chunks[0] as Buffer) : Buffer.concat(this.chunks);
      this.chunks = [all];
      const length = all.readUInt32BE(1);
      if (length > limit) return messageTooLarge(length, limit);
      if (all.length < 5 + length) return messages;
      let message = all.subarray(5, 5 + length);
      if (all[0] === 1) {
        const decoded = this.decompress(message);
        if (decoded instanceof EtcdError) return decoded;
        message = decoded;
      }
      messages.push(message);
      const rest = all.subarray(5 + length);
      this.chunks = rest.length > 0 ? [rest] : [];
      this.buffered = rest.length;
    }
  }

  private decompress(message: Buffer): Buffer | EtcdError {
    try {
      if (this.encoding === 'gzip') return gunzipSync(message);
      if (this.encoding === 'deflate') return inflateSync(message);
    } catch (error) {
      return new EtcdError(Code.INTERNAL, `grpc: failed to decompress the received message: ${String(error)}`);
    }
    return new EtcdError(
      Code.INTERNAL,
      `grpc: compressed flag set with ${this.encoding === '' ? 'identity or empty' : this.encoding} encoding`,
    );
  }

  get ended(): boolean {
    return this.localClosed || this.conn.closed;
  }

  backlog(): number {
    let bytes = this.conn.backlog();
    for (const chunk of this.queue) bytes += chunk.length;
    return bytes;
  }

  send(message: Buffer): void {
    if (this.localClosed) return;
    this.conn.sendMessage(this, message);
  }

  end(error?: EtcdError): void {
    if (this.localClosed) return;
    this.conn.finish(this, error);
  }
}

export interface ConnectionHooks {
  readonly table: Map<string, ServedMethod>;
  /** Messages larger than this are refused with grpc-go's error. */
  readonly receiveLimit: number;
  /** Any failure as the etcd error the client should see. */
  toEtcdError(error: unknown): EtcdError;
  onClose(conn: Connection): void;
}

export class Connection {
  closed = false;
  private input: Buffer | null = null;
  private prefaceSeen = false;
  private readonly decoder = new HpackDecoder();
  private readonly streams = new Map<number, Stream>();
  private lastStreamId = 0;
  /** A header block in progress (HEADERS awaiting CONTINUATION). */
  private headerBlock: { stream: number; flags: number; fragments: Buffer[]; size: number } | null = null;
  private peerInitialWindow = DEFAULT_WINDOW;
  private peerMaxFrame = MAX_FRAME;
  private sendWindow = DEFAULT_WINDOW;
  private recvUnacked = 0;
  private readonly blocked = new Set<Stream>();
  private out: Buffer[] = [];
  private outBytes = 0;
  private flushScheduled = false;
  private goingAway = false;

  constructor(
    private readonly socket: Socket,
    private readonly hooks: ConnectionHooks,
  ) {
    socket.setNoDelay(true);
    const settings = Buffer.alloc(18);
    settings.writeUInt16BE(SETTINGS_INITIAL_WINDOW_SIZE, 0);
    settings.writeUInt32BE(STREAM_WINDOW, 2);
    settings.writeUInt16BE(SETTINGS_MAX_HEADER_LIST_SIZE, 6);
    settings.writeUInt32BE(MAX_HEADER_BLOCK, 8);
    settings.writeUInt16BE(SETTINGS_HEADER_TABLE_SIZE, 12);
    settings.writeUInt32BE(4096, 14);
    this.write(frame(SETTINGS, 0, 0, settings));
    this.write(this.windowUpdate(0, CONNECTION_WINDOW - DEFAULT_WINDOW));
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', () => this.teardown());
    socket.on('close', () => this.teardown());
  }

  // ---- output ----

  private write(buf: Buffer): void {
    if (this.closed) return;
    this.out.push(buf);
    this.outBytes += buf.length;
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => this.flush());
    }
  }

  private flush(): void {
    this.flushScheduled = false;
    if (this.closed || this.out.length === 0) return;
    const data = this.out.length === 1 ? (this.out[0] as Buffer) : Buffer.concat(this.out, this.outBytes);
    this.out = [];
    this.outBytes = 0;
    this.socket.write(data);
  }

  /** Bytes written on this connection that the client has not read yet. */
  backlog(): number {
    return this.outBytes + this.socket.writableLength;
  }

  private windowUpdate(stream: number, increment: number): Buffer {
    const payload = Buffer.allocUnsafe(4);
    payload.writeUInt32BE(increment, 0);
    return frame(WINDOW_UPDATE, 0, stream, payload);
  }

  private rstStream(stream: number, code: number): void {
    const payload = Buffer.allocUnsafe(4);
    payload.writeUInt32BE(code, 0);
    this.write(frame(RST_STREAM, 0, stream, payload));
  }

  private goaway(code: number, debug = ''): void {
    const text = Buffer.from(debug);
    const payload = Buffer.allocUnsafe(8 + text.length);
    payload.writeUInt32BE(this.lastStreamId, 0);
    payload.writeUInt32BE(code, 4);
    text.copy(payload, 8);
    this.write(frame(GOAWAY, 0, 0, payload));
  }

  sendMessage(stream: Stream, message: Buffer): void {
    if (!stream.headersSent) {
      stream.headersSent = true;
      this.write(frame(HEADERS, END_HEADERS, stream.id, RESPONSE_HEADERS));
    }
    const length = 5 + message.length;
    if (
      stream.queue.length === 0 &&
      length <= stream.sendWindow &&
      length <= this.sendWindow &&
      length <= this.peerMaxFrame
    ) {
      // The common case: one DATA frame, in one allocation.
      const buf = Buffer.allocUnsafe(9 + length);
      frameHeader(buf, 0, length, DATA, 0, stream.id);
      buf[9] = 0;
      buf.writeUInt32BE(message.length, 10);
      message.copy(buf, 14);
      stream.sendWindow -= length;
      this.sendWindow -= length;
      this.write(buf);
      return;
    }
    const prefix = Buffer.allocUnsafe(5);
    prefix[0] = 0;
    prefix.writeUInt32BE(message.length, 1);
    stream.queue.push(prefix, message);
    this.pump(stream);
  }

  /** Ends a call: OK trailers, or the error's status (trailers only when nothing was sent). */
  finish(stream: Stream, error?: EtcdError): void {
    if (stream.localClosed) return;
    if (error !== undefined && !stream.headersSent && stream.queue.length === 0) {
      stream.headersSent = true;
      stream.trailers = trailersFor(error, true);
    } else {
      if (!stream.headersSent) {
        stream.headersSent = true;
        this.write(frame(HEADERS, END_HEADERS, stream.id, RESPONSE_HEADERS));
      }
      stream.trailers = error === undefined ? OK_TRAILERS : trailersFor(error, false);
    }
    this.pump(stream);
  }

  /** Sends what the windows allow of a stream's queued data, then its trailers. */
  private pump(stream: Stream): void {
    while (stream.queue.length > 0) {
      const room = Math.min(stream.sendWindow, this.sendWindow, this.peerMaxFrame);
      if (room <= 0) {
        this.blocked.add(stream);
        return;
      }
      const parts: Buffer[] = [];
      let size = 0;
      while (size < room && stream.queue.length > 0) {
        const head = stream.queue[0] as Buffer;
        const take = Math.min(head.length, room - size);
        parts.push(take === head.length ? head : head.subarray(0, take));
        if (take === head.length) stream.queue.shift();
        else stream.queue[0] = head.subarray(take);
        size += take;
      }
      const header = Buffer.allocUnsafe(9);
      frameHeader(header, 0, size, DATA, 0, stream.id);
      this.write(parts.length === 1 ? Buffer.concat([header, parts[0] as Buffer]) : Buffer.concat([header, ...parts]));
      stream.sendWindow -= size;
      this.sendWindow -= size;
    }
    this.blocked.delete(stream);
    if (stream.trailers !== null && !stream.localClosed) {
      this.write(frame(HEADERS, END_HEADERS | END_STREAM, stream.id, stream.trailers));
      stream.trailers = null;
      stream.localClosed = true;
      if (!stream.remoteClosed) {
        // The client may still be sending: it is not needed.
        this.rstStream(stream.id, NO_ERROR);
        stream.remoteClosed = true;
      }
      this.release(stream);
    }
  }

  private release(stream: Stream): void {
    if (!stream.localClosed || !stream.remoteClosed) return;
    this.streams.delete(stream.id);
    this.blocked.delete(stream);
    stream.handler?.close();
    if (this.goingAway && this.streams.size === 0) this.socket.end();
  }

  // ---- input ----

  private onData(chunk: Buffer): void {
    if (this.closed) return;
    this.input = this.input === null || this.input.length === 0 ? chunk : Buffer.concat([this.input, chunk]);
    try {
      this.parse();
    } catch (error) {
      if (error instanceof ConnectionError) this.fail(error.code, error.message);
      else if (error instanceof HpackError || error instanceof HuffmanError) {
        this.fail(COMPRESSION_ERROR, error.message);
      } else {
        // A bug, not the client's fault: this connection ends, the server goes on.
        console.error(`kvmq serve: connection closed after an internal error: ${String(error)}`);
        this.fail(INTERNAL_ERROR, 'internal error');
      }
    }
  }

  private fail(code: number, message: string): void {
    this.goaway(code, message);
    this.flush();
    this.socket.end();
    this.teardown();
  }

  private parse(): void {
    const buf = this.input as Buffer;
    let pos = 0;
    if (!this.prefaceSeen) {
      if (buf.length < PREFACE.length) {
        if (!PREFACE.subarray(0, buf.length).equals(buf)) this.socket.destroy();
        return;
      }
      if (!buf.subarray(0, PREFACE.length).equals(PREFACE)) {
        this.socket.destroy();
        return;
      }
      this.prefaceSeen = true;
      pos = PREFACE.length;
    }
    while (buf.length - pos >= 9) {
      const length = ((buf[pos] as number) << 16) | ((buf[pos + 1] as number) << 8) | (buf[pos + 2] as number);
      if (length > MAX_FRAME) throw new ConnectionError(FRAME_SIZE_ERROR, `frame of ${length} bytes`);
      if (buf.length - pos < 9 + length) break;
      const type = buf[pos + 3] as number;
      const flags = buf[pos + 4] as number;
      const stream = buf.readUInt32BE(pos + 5) & 0x7fffffff;
      const payload = buf.subarray(pos + 9, pos + 9 + length);
      pos += 9 + length;
      this.onFrame(type, flags, stream, payload);
      if (this.closed) return;
    }
    this.input = pos === buf.length ? null : buf.subarray(pos);
  }

  private onFrame(type: number, flags: number, id: number, payload: Buffer): void {
    if (this.headerBlock !== null && type !== CONTINUATION) {
      throw new ConnectionError(PROTOCOL_ERROR, 'expected CONTINUATION');
    }
    switch (type) {
      case DATA:
        this.onDataFrame(flags, id, payload);
        return;
      case HEADERS:
        this.onHeaders(flags, id, payload);
        return;
      case CONTINUATION:
        this.onContinuation(flags, id, payload);
        return;
      case SETTINGS:
        if (id !== 0) throw new ConnectionError(PROTOCOL_ERROR, 'SETTINGS on a stream');
        if ((flags & ACK) === 0) this.onSettings(payload);
        return;
      case PING:
        if (id !== 0 || payload.length !== 8) throw new ConnectionError(PROTOCOL_ERROR, 'bad PING');
        if ((flags & ACK) === 0) {
          this.write(frame(PING, ACK, 0, payload));
          this.flush();
        }
        return;
      case WINDOW_UPDATE:
        this.onWindowUpdate(id, payload);
        return;
      case RST_STREAM: {
        const stream = this.streams.get(id);
        if (stream !== undefined) {
          stream.remoteClosed = true;
          stream.localClosed = true;
          this.release(stream);
        }
        return;
      }
      case GOAWAY:
        this.goingAway = true;
        if (this.streams.size === 0) this.socket.end();
        return;
      case PRIORITY:
        return;
      case PUSH_PROMISE:
        throw new ConnectionError(PROTOCOL_ERROR, 'PUSH_PROMISE from a client');
      default:
        // Unknown frame types are ignored (RFC 9113 §4.1).
        return;
    }
  }

  private onSettings(payload: Buffer): void {
    if (payload.length % 6 !== 0) throw new ConnectionError(FRAME_SIZE_ERROR, 'bad SETTINGS length');
    for (let at = 0; at < payload.length; at += 6) {
      const key = payload.readUInt16BE(at);
      const value = payload.readUInt32BE(at + 2);
      if (key === SETTINGS_INITIAL_WINDOW_SIZE) {
        if (value > MAX_WINDOW) throw new ConnectionError(FLOW_CONTROL_ERROR, 'initial window too large');
        const delta = value - this.peerInitialWindow;
        this.peerInitialWindow = value;
        for (const stream of this.streams.values()) stream.sendWindow += delta;
      } else if (key === SETTINGS_MAX_FRAME_SIZE) {
        if (value < 16384 || value > 16777215) throw new ConnectionError(PROTOCOL_ERROR, 'bad max frame size');
        this.peerMaxFrame = value;
      }
    }
    this.write(frame(SETTINGS, ACK, 0, Buffer.alloc(0)));
    for (const stream of [...this.blocked]) this.pump(stream);
  }

  private onWindowUpdate(id: number, payload: Buffer): void {
    if (payload.length !== 4) throw new ConnectionError(FRAME_SIZE_ERROR, 'bad WINDOW_UPDATE');
    const increment = payload.readUInt32BE(0) & 0x7fffffff;
    if (id === 0) {
      this.sendWindow += increment;
      for (const stream of [...this.blocked]) this.pump(stream);
      return;
    }
    const stream = this.streams.get(id);
    if (stream === undefined) return;
    stream.sendWindow += increment;
    this.pump(stream);
  }

  private unpad(flags: number, payload: Buffer): Buffer {
    if ((flags & PADDED) === 0) return payload;
    const pad = payload[0] ?? 0;
    if (pad >= payload.length) throw new ConnectionError(PROTOCOL_ERROR, 'padding too long');
    return payload.subarray(1, payload.length - pad);
  }

  private onHeaders(flags: number, id: number, payload: Buffer): void {
    if (id === 0) throw new ConnectionError(PROTOCOL_ERROR, 'HEADERS on stream 0');
    let block = this.unpad(flags, payload);
    if (flags & PRIORITY_FLAG) block = block.subarray(5);
    this.headerBlock = { stream: id, flags, fragments: [block], size: block.length };
    if (flags & END_HEADERS) this.headersDone();
  }

  private onContinuation(flags: number, id: number, payload: Buffer): void {
    const pending = this.headerBlock;
    if (pending === null || pending.stream !== id) throw new ConnectionError(PROTOCOL_ERROR, 'stray CONTINUATION');
    pending.fragments.push(payload);
    pending.size += payload.length;
    if (pending.size > MAX_HEADER_BLOCK) throw new ConnectionError(PROTOCOL_ERROR, 'header block too large');
    if (flags & END_HEADERS) this.headersDone();
  }

  private headersDone(): void {
    const pending = this.headerBlock as { stream: number; flags: number; fragments: Buffer[] };
    this.headerBlock = null;
    const block = pending.fragments.length === 1 ? (pending.fragments[0] as Buffer) : Buffer.concat(pending.fragments);
    const id = pending.stream;
    const endStream = (pending.flags & END_STREAM) !== 0;
    let path = '';
    let token: string | undefined;
    let contentType = '';
    let encoding = '';
    // Every block is decoded, even one that is refused: the peer's encoder counts on the table.
    this.decoder.decode(block, (name, value) => {
      if (name === ':path') path = value;
      else if (name === 'content-type') contentType = value;
      else if (name === 'token') token = value;
      else if (name === 'authorization' && token === undefined) token = value;
      else if (name === 'grpc-encoding') encoding = value;
    });
    const existing = this.streams.get(id);
    if (existing !== undefined) {
      // Trailers from the client: its side is done.
      if (endStream) this.remoteEnd(existing);
      return;
    }
    if (id <= this.lastStreamId || id % 2 === 0) {
      if (id <= this.lastStreamId) return; // a stream already closed
      throw new ConnectionError(PROTOCOL_ERROR, `bad stream id ${id}`);
    }
    this.lastStreamId = id;
    const stream = new Stream(id, this, this.peerInitialWindow);
    this.streams.set(id, stream);
    stream.context = { token };
    stream.encoding = encoding;
    if (this.goingAway) {
      stream.remoteClosed = true;
      this.finish(stream, new EtcdError(Code.UNAVAILABLE, 'the server is shutting down'));
      return;
    }
    if (!contentType.startsWith('application/grpc')) {
      stream.remoteClosed = true;
      this.finish(stream, new EtcdError(Code.UNKNOWN, `invalid gRPC request content-type "${contentType}"`));
      return;
    }
    const method = this.hooks.table.get(path);
    if (method === undefined) {
      stream.remoteClosed = true;
      this.finish(stream, unknownMethod(path, this.hooks.table));
      return;
    }
    stream.method = method;
    if (method.method.kind === 'bidi') {
      try {
        stream.handler = method.method.open(stream.context, stream);
      } catch (error) {
        this.finish(stream, this.hooks.toEtcdError(error));
        return;
      }
    }
    if (endStream) this.remoteEnd(stream);
  }

  private onDataFrame(flags: number, id: number, payload: Buffer): void {
    // Flow control counts the whole frame, padding included.
    this.recvUnacked += payload.length;
    if (this.recvUnacked >= CONNECTION_WINDOW / 2) {
      this.write(this.windowUpdate(0, this.recvUnacked));
      this.recvUnacked = 0;
    }
    const stream = this.streams.get(id);
    if (stream === undefined || stream.remoteClosed) return;
    const data = this.unpad(flags, payload);
    const endStream = (flags & END_STREAM) !== 0;
    if (!endStream) {
      stream.recvUnacked += payload.length;
      if (stream.recvUnacked >= STREAM_WINDOW / 2) {
        this.write(this.windowUpdate(id, stream.recvUnacked));
        stream.recvUnacked = 0;
      }
    }
    if (stream.localClosed) {
      if (endStream) this.remoteEnd(stream);
      return;
    }
    const messages = stream.receive(data, this.hooks.receiveLimit);
    if (messages instanceof EtcdError) {
      stream.remoteClosed = true;
      this.finish(stream, messages);
      return;
    }
    const method = stream.method;
    if (method !== null) {
      for (const message of messages) {
        if (stream.ended) break;
        if (method.method.kind === 'bidi') {
          try {
            stream.handler?.message(message);
          } catch (error) {
            this.finish(stream, this.hooks.toEtcdError(error));
          }
        } else stream.messages.push(message);
      }
    }
    if (endStream) this.remoteEnd(stream);
  }

  /** The client finished sending: a unary or server-streaming call runs now, a bidi handler hears of it. */
  private remoteEnd(stream: Stream): void {
    if (stream.remoteClosed) return;
    stream.remoteClosed = true;
    const served = stream.method;
    if (served === null || stream.localClosed) {
      this.release(stream);
      return;
    }
    const method = served.method;
    if (method.kind === 'bidi') {
      stream.handler?.end();
      this.release(stream);
      return;
    }
    const request = stream.messages[0];
    if (request === undefined || stream.messages.length > 1) {
      this.finish(
        stream,
        new EtcdError(
          Code.INTERNAL,
          request === undefined ? 'grpc: no request message' : 'grpc: too many request messages',
        ),
      );
      return;
    }
    if (method.kind === 'server') {
      try {
        method.handle(request, stream.context, stream);
      } catch (error) {
        this.finish(stream, this.hooks.toEtcdError(error));
      }
      return;
    }
    let result: Buffer | Promise<Buffer>;
    try {
      result = method.handle(request, stream.context);
    } catch (error) {
      this.finish(stream, this.hooks.toEtcdError(error));
      return;
    }
    if (Buffer.isBuffer(result)) this.reply(stream, result);
    else {
      result.then(
        (buf) => this.reply(stream, buf),
        (error: unknown) => this.finish(stream, this.hooks.toEtcdError(error)),
      );
    }
  }

  /** A unary reply: headers, the message and OK trailers, in one write when the windows allow. */
  private reply(stream: Stream, message: Buffer): void {
    if (stream.localClosed || this.closed) return;
    const length = 5 + message.length;
    if (stream.headersSent || length > stream.sendWindow || length > this.sendWindow || length > this.peerMaxFrame) {
      this.sendMessage(stream, message);
      this.finish(stream);
      return;
    }
    const size = 9 + RESPONSE_HEADERS.length + 9 + length + 9 + OK_TRAILERS.length;
    const buf = Buffer.allocUnsafe(size);
    let at = 0;
    frameHeader(buf, at, RESPONSE_HEADERS.length, HEADERS, END_HEADERS, stream.id);
    RESPONSE_HEADERS.copy(buf, at + 9);
    at += 9 + RESPONSE_HEADERS.length;
    frameHeader(buf, at, length, DATA, 0, stream.id);
    buf[at + 9] = 0;
    buf.writeUInt32BE(message.length, at + 10);
    message.copy(buf, at + 14);
    at += 9 + length;
    frameHeader(buf, at, OK_TRAILERS.length, HEADERS, END_HEADERS | END_STREAM, stream.id);
    OK_TRAILERS.copy(buf, at + 9);
    stream.sendWindow -= length;
    this.sendWindow -= length;
    stream.headersSent = true;
    stream.localClosed = true;
    this.write(buf);
    this.release(stream);
  }

  /** Stops taking new calls; the socket closes once the calls running now end. */
  shutdown(): void {
    if (this.closed) return;
    this.goingAway = true;
    this.goaway(NO_ERROR);
    this.flush();
    if (this.streams.size === 0) this.socket.end();
  }

  /** Closes at once, ending every call. */
  destroy(): void {
    this.flush();
    this.socket.destroy();
    this.teardown();
  }

  private teardown(): void {
    if (this.closed) return;
    this.closed = true;
    const streams = [...this.streams.values()];
    this.streams.clear();
    for (const stream of streams) {
      stream.localClosed = true;
      stream.handler?.close();
    }
    this.hooks.onClose(this);
  }
}

/** grpc-go's texts for a path the server does not serve. */
function unknownMethod(path: string, table: Map<string, ServedMethod>): EtcdError {
  const match = /^\/([^/]+)\/([^/]+)$/.exec(path);
  if (match === null) return new EtcdError(Code.UNIMPLEMENTED, `malformed method name: "${path}"`);
  const [, service = '', method = ''] = match;
  const known = [...table.keys()].some((p) => p.startsWith(`/${service}/`));
  return new EtcdError(
    Code.UNIMPLEMENTED,
    known ? `unknown method ${method} for service ${service}` : `unknown service ${service}`,
  );
}
