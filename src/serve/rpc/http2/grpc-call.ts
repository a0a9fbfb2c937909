/**
 * One gRPC call on an HTTP/2 stream: its request messages read off the stream, its handler run, its
 * responses written. Stream events go to functions shared by every call (the call hangs off its stream),
 * so a request costs no closures of its own.
 *
 * A unary or server-streaming handler starts only once the client has ended its side, on the next turn of
 * the event loop, and only if the stream is still open then: a request reset in the same read (the rapid
 * reset attack) never runs.
 */
import { constants, type OutgoingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import { Code, EtcdError } from '../../errors.js';
import type { CallContext, Method, Sink, StreamHandler } from '../method.js';
import { toEtcdError } from '../status.js';
import type { ConnectionState } from './connection-state.js';
import { errorTrailers, OK_TRAILERS, RESPOND, RESPOND_ENDED, RESPONSE_HEADERS, trailersOnly } from './grpc-headers.js';
import { MAX_BUFFERED_REQUEST_BYTES } from './limits.js';
import { MessageReader, type MessageTarget } from './message-reader.js';

const CALL = Symbol('kvmq.grpcCall');
type CallStream = ServerHttp2Stream & { [CALL]?: GrpcCall };

const tooManyMessages = (): EtcdError => new EtcdError(Code.INTERNAL, 'grpc: too many request messages');

function onData(this: CallStream, chunk: Buffer): void {
  this[CALL]?.receive(chunk);
}
function onEnd(this: CallStream): void {
  this[CALL]?.clientEnded();
}
function onClose(this: CallStream): void {
  this[CALL]?.closed();
}
function onWantTrailers(this: CallStream): void {
  const call = this[CALL];
  this.sendTrailers(call?.trailers ?? OK_TRAILERS);
  // The client may still be sending: it is not needed. Reset only now, so the reset follows the trailers.
  if (call?.resetAfterTrailers === true) this.close(constants.NGHTTP2_NO_ERROR);
}
function start(call: GrpcCall): void {
  call.start();
}

/** Answers a stream no call was made for with an error, and stops the client sending on it. */
export function refuse(stream: ServerHttp2Stream, error: EtcdError): void {
  if (stream.destroyed || stream.closed) return;
  stream.respond(trailersOnly(error), RESPOND_ENDED);
  stream.close(constants.NGHTTP2_NO_ERROR);
}

export class GrpcCall implements Sink, MessageTarget {
  /** The trailers sent once the response data is out. */
  trailers: OutgoingHttpHeaders = OK_TRAILERS;
  resetAfterTrailers = false;
  private readonly reader: MessageReader;
  private request: Buffer | null = null;
  private handler: StreamHandler | null = null;
  private responded = false;
  private finished = false;
  private running = false;
  /** Request bytes this call has counted in its connection's total. */
  private counted = 0;

  constructor(
    private readonly stream: CallStream,
    private readonly conn: ConnectionState,
    private readonly method: Method,
    private readonly context: CallContext,
    receiveLimit: number,
  ) {
    this.reader = new MessageReader(receiveLimit);
    stream[CALL] = this;
    conn.streams.add(stream);
    stream.on('data', onData);
    stream.on('end', onEnd);
    stream.on('close', onClose);
    stream.on('wantTrailers', onWantTrailers);
    if (method.kind === 'bidi') {
      try {
        this.handler = method.open(context, this);
      } catch (error) {
        this.end(toEtcdError(error));
      }
    }
  }

  receive(chunk: Buffer): void {
    if (this.finished) return;
    if (this.request !== null) {
      // A unary or server-streaming call takes one message; nothing after it is kept.
      this.end(tooManyMessages());
      return;
    }
    const error = this.reader.push(chunk, this);
    // The call may have ended while the chunk was read (a handler error): then it holds nothing.
    if (this.ended) return;
    this.conn.bufferedRequestBytes += this.reader.pending - this.counted;
    this.counted = this.reader.pending;
    if (error !== null) this.end(error);
    else if (this.conn.bufferedRequestBytes > MAX_BUFFERED_REQUEST_BYTES) {
      this.end(new EtcdError(Code.RESOURCE_EXHAUSTED, 'kvmq: too many request bytes pending on this connection'));
    } else if (this.handler !== null && !this.conn.accepting()) this.conn.hold(this.stream);
  }

  onMessage(message: Buffer): void {
    if (this.finished) return;
    if (this.handler === null) {
      if (this.request === null) this.request = message;
      else this.end(tooManyMessages());
      return;
    }
    try {
      this.handler.message(message);
    } catch (error) {
      this.end(toEtcdError(error));
    }
  }

  clientEnded(): void {
    if (this.handler !== null) this.handler.end();
    // Deferred, so that a RST_STREAM read with the request is seen first.
    else if (!this.finished) setImmediate(start, this);
  }

  start(): void {
    const stream = this.stream;
    if (this.finished || stream.destroyed || stream.closed) return;
    const request = this.request;
    if (request === null) {
      // grpc-go's texts for a stream that ended before its message did.
      this.end(new EtcdError(Code.UNKNOWN, this.reader.pending > 0 ? 'unexpected EOF' : 'EOF'));
      return;
    }
    this.running = true;
    this.conn.inFlight++;
    const method = this.method;
    if (method.kind === 'bidi') return;
    if (method.kind === 'server') {
      try {
        method.handle(request, this.context, this);
      } catch (error) {
        this.end(toEtcdError(error));
      }
      return;
    }
    let result: Buffer | Promise<Buffer>;
    try {
      result = method.handle(request, this.context);
    } catch (error) {
      this.end(toEtcdError(error));
      return;
    }
    if (Buffer.isBuffer(result)) this.reply(result);
    else {
      result.then(
        (response) => this.reply(response),
        (error: unknown) => this.end(toEtcdError(error)),
      );
    }
  }

  /** A unary answer: headers, the message, then the trailers. */
  private reply(message: Buffer): void {
    this.settle();
    if (this.finished) return;
    this.finished = true;
    const stream = this.stream;
    if (stream.destroyed || stream.closed) return;
    stream.respond(RESPONSE_HEADERS, RESPOND);
    this.responded = true;
    stream.cork();
    stream.write(prefix(message.length));
    stream.end(message);
  }

  get ended(): boolean {
    return this.finished || this.stream.destroyed || this.stream.closed;
  }

  backlog(): number {
    return this.conn.backlog();
  }

  send(message: Buffer): void {
    if (this.ended) return;
    const stream = this.stream;
    if (!this.responded) {
      stream.respond(RESPONSE_HEADERS, RESPOND);
      this.responded = true;
    }
    stream.cork();
    stream.write(prefix(message.length));
    stream.write(message);
    stream.uncork();
  }

  end(error?: EtcdError): void {
    this.settle();
    if (this.finished) return;
    this.finished = true;
    this.discardInput();
    const stream = this.stream;
    if (stream.destroyed || stream.closed) return;
    if (error !== undefined && !this.responded) {
      refuse(stream, error);
      return;
    }
    if (!this.responded) stream.respond(RESPONSE_HEADERS, RESPOND);
    this.responded = true;
    if (error !== undefined) this.trailers = errorTrailers(error);
    this.resetAfterTrailers = !stream.readableEnded;
    stream.end();
  }

  closed(): void {
    this.discardInput();
    this.conn.forget(this.stream);
    if (!this.running && this.handler === null) this.finished = true;
    const handler = this.handler;
    this.handler = null;
    handler?.close();
  }

  /** The handler is done: it no longer counts against the connection's calls in flight. */
  private settle(): void {
    if (!this.running) return;
    this.running = false;
    this.conn.inFlight--;
  }

  private discardInput(): void {
    this.conn.bufferedRequestBytes -= this.counted;
    this.counted = 0;
    this.reader.clear();
  }
}

function prefix(length: number): Buffer {
  const buf = Buffer.allocUnsafe(5);
  buf[0] = 0;
  buf.writeUInt32BE(length, 1);
  return buf;
}
