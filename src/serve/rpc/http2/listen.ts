/**
 * The gRPC transport on node:http2 (nghttp2), with HTTP/1.1 beside it on the same port for the fallback
 * handler, as etcd serves its JSON gateway: over TLS the protocol is chosen by ALPN; in plaintext by the
 * first bytes of each connection (HTTP/2's preface, or anything else for HTTP/1.1).
 */
import { createServer as createHttp1Server, type Server as Http1Server } from 'node:http';
import {
  createSecureServer,
  createServer as createHttp2Server,
  type Http2SecureServer,
  type Http2Server,
  type ServerHttp2Session,
} from 'node:http2';
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import type { ServedMethod } from '../table.js';
import { refuseNonGrpc, type FallbackHandler } from './fallback.js';
import { routeStreams } from './grpc-router.js';
import { NGHTTP2_OPTIONS, SHUTDOWN_GRACE_MS, SNIFF_TIMEOUT_MS } from './limits.js';

export interface Transport {
  readonly port: number;
  /** Stops listening, sends GOAWAY, gives running calls a short grace, then cuts what is left. */
  close(): Promise<void>;
}

/** PEM contents, as etcd's --cert-file, --key-file and --trusted-ca-file give them. */
export interface TransportTls {
  readonly cert: Buffer;
  readonly key: Buffer;
  readonly ca?: Buffer;
  /** etcd's --client-cert-auth: a client without a certificate signed by `ca` is refused. */
  readonly clientCertAuth: boolean;
}

export interface TransportOptions {
  readonly host: string;
  readonly port: number;
  readonly table: ReadonlyMap<string, ServedMethod>;
  readonly receiveLimit: number;
  readonly tls?: TransportTls;
  /** Requests that are not gRPC. @defaultValue a 404/415 with a short text */
  readonly fallback?: FallbackHandler;
}

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

export async function listenTransport(options: TransportOptions): Promise<Transport> {
  const fallback = options.fallback ?? refuseNonGrpc;
  const sessions = new Set<ServerHttp2Session>();
  const sockets = new Set<Socket>();
  const routing = {
    table: options.table,
    receiveLimit: options.receiveLimit,
    fallback,
    onSession(session: ServerHttp2Session) {
      sessions.add(session);
      session.once('close', () => sessions.delete(session));
    },
  };
  let listener: NetServer | Http2SecureServer;
  let http1: Http1Server | null = null;
  if (options.tls === undefined) {
    const http2 = createHttp2Server(NGHTTP2_OPTIONS);
    routeStreams(http2, routing);
    const h1 = createHttp1Server(fallback);
    http1 = h1;
    listener = createNetServer((socket) => {
      sockets.add(socket);
      socket.once('close', () => sockets.delete(socket));
      sniff(socket, http2, h1);
    });
  } else {
    const tls = options.tls;
    const secure = createSecureServer({
      ...NGHTTP2_OPTIONS,
      allowHTTP1: true,
      cert: tls.cert,
      key: tls.key,
      ...(tls.ca === undefined ? {} : { ca: tls.ca }),
      requestCert: tls.clientCertAuth,
      rejectUnauthorized: tls.clientCertAuth,
    });
    routeStreams(secure, routing);
    secure.on('secureConnection', (socket: Socket) => {
      sockets.add(socket);
      socket.once('close', () => sockets.delete(socket));
    });
    listener = secure;
  }
  const server = listener;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: options.host, port: options.port }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : options.port;
  let closing: Promise<void> | null = null;
  return {
    port,
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close();
        http1?.closeIdleConnections();
        for (const session of sessions) session.close();
        // The timers stay referenced: shutting down keeps the process alive until it is done.
        const check = setInterval(() => {
          if (sessions.size > 0 || sockets.size > 0) return;
          clearInterval(check);
          clearTimeout(deadline);
          resolve();
        }, 20);
        const deadline = setTimeout(() => {
          clearInterval(check);
          for (const session of sessions) session.destroy();
          for (const socket of sockets) socket.destroy();
          resolve();
        }, SHUTDOWN_GRACE_MS);
      });
      return closing;
    },
  };
}

/**
 * Hands a plaintext connection to the HTTP/2 server if it opens with HTTP/2's preface, else to the
 * HTTP/1.1 one, with the bytes read so far put back. A connection that says too little in time is closed.
 */
function sniff(socket: Socket, http2: Http2Server, http1: Http1Server): void {
  let seen: Buffer = Buffer.alloc(0);
  const onData = (chunk: Buffer): void => {
    seen = seen.length === 0 ? chunk : Buffer.concat([seen, chunk]);
    const compared = Math.min(seen.length, PREFACE.length);
    const isPreface = seen.subarray(0, compared).equals(PREFACE.subarray(0, compared));
    if (isPreface && compared < PREFACE.length) return;
    socket.off('data', onData);
    socket.setTimeout(0);
    socket.pause();
    socket.unshift(seen);
    if (isPreface) http2.emit('connection', socket);
    else {
      http1.emit('connection', socket);
      // Node's HTTP/1 parser reads the socket's handle directly: the bytes put back come as 'data' events.
      socket.resume();
    }
  };
  socket.on('error', () => socket.destroy());
  socket.on('data', onData);
  socket.setTimeout(SNIFF_TIMEOUT_MS, () => socket.destroy());
}
