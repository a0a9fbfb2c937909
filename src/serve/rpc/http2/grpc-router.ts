/**
 * Routes the streams of an HTTP/2 server: gRPC requests to the method table (./grpc-call.ts), anything
 * else to the fallback handler through Node's own request/response objects.
 */
import {
  constants,
  type Http2SecureServer,
  type Http2Server,
  type IncomingHttpHeaders,
  type ServerHttp2Session,
  type ServerHttp2Stream,
} from 'node:http2';
import type { ServedMethod } from '../table.js';
import { ConnectionState } from './connection-state.js';
import type { FallbackHandler } from './fallback.js';
import { GrpcCall, refuse } from './grpc-call.js';
import { unknownMethod, unsupportedEncoding } from './grpc-headers.js';
import { CONNECTION_WINDOW_BYTES, MAX_CALLS_IN_FLIGHT } from './limits.js';

const STATE = Symbol('kvmq.connectionState');
type TrackedSession = ServerHttp2Session & { [STATE]?: ConnectionState };
type StreamListener = (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, flags: number, raw: string[]) => void;

function ignore(): void {
  // Errors of a stream or session end it; there is nothing else to do with them.
}

function isGrpc(contentType: string | undefined): boolean {
  return (
    contentType !== undefined &&
    contentType.startsWith('application/grpc') &&
    (contentType.length === 16 || contentType[16] === '+' || contentType[16] === ';')
  );
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

export interface RouterOptions {
  readonly table: ReadonlyMap<string, ServedMethod>;
  /** Messages larger than this are refused with grpc-go's error. */
  readonly receiveLimit: number;
  readonly fallback: FallbackHandler;
  /** Each new connection, so the caller can close them at shutdown. */
  onSession(session: ServerHttp2Session): void;
}

export function routeStreams(server: Http2Server | Http2SecureServer, options: RouterOptions): void {
  const services = new Set([...options.table.keys()].map((path) => path.slice(1, path.lastIndexOf('/'))));
  // A 'request' listener makes Node wrap every stream in request/response objects (and serves HTTP/1.1 with
  // allowHTTP1): keep Node's wrapper, but call it only for the streams that are not gRPC.
  const before = new Set(server.listeners('stream'));
  server.on('request', options.fallback);
  const wrappers = server.listeners('stream').filter((listener) => !before.has(listener)) as StreamListener[];
  for (const wrapper of wrappers) server.removeListener('stream', wrapper);
  const toFallback = wrappers[0];

  server.on('session', (session: TrackedSession) => {
    session[STATE] = new ConnectionState(session);
    session.on('error', ignore);
    session.once('close', () => session[STATE]?.stop());
    session.once('connect', () => session.setLocalWindowSize(CONNECTION_WINDOW_BYTES));
    options.onSession(session);
  });

  server.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, flags: number, raw: string[]) => {
    stream.on('error', ignore);
    if (!isGrpc(headers['content-type'])) {
      if (toFallback !== undefined) toFallback(stream, headers, flags, raw);
      else {
        stream.respond({ ':status': 415 });
        stream.end();
      }
      return;
    }
    const conn = (stream.session as TrackedSession | undefined)?.[STATE];
    if (conn === undefined) return;
    const path = headers[':path'] ?? '';
    const served = options.table.get(path);
    if (served === undefined) {
      refuse(stream, unknownMethod(path, services));
      return;
    }
    const encoding = first(headers['grpc-encoding']);
    if (encoding !== undefined && encoding !== 'identity') {
      refuse(stream, unsupportedEncoding(encoding));
      return;
    }
    // Refused streams were not processed, so a client may send them again (grpc clients do so on their own).
    if (conn.inFlight >= MAX_CALLS_IN_FLIGHT || !conn.accepting()) {
      stream.close(constants.NGHTTP2_REFUSED_STREAM);
      return;
    }
    const token = first(headers.token) ?? first(headers.authorization);
    new GrpcCall(stream, conn, served.method, { token }, options.receiveLimit);
  });
}
