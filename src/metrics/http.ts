/**
 * A small HTTP server for Prometheus to scrape: GET or HEAD /metrics, nothing else. Written for a port an
 * attacker may reach: request headers are bounded in size and in time (a slow sender is cut off), idle and
 * stalled sockets are closed, connections are capped, no request body is ever read, and concurrent scrapes
 * share one collection, so a flood costs the store one read per scrape at most.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { MetricsListenError } from '../model/errors.js';

/** What the server exposes: a prom-client Registry, or anything with the same two members. */
export interface Exposition {
  metrics(): Promise<string>;
  readonly contentType: string;
}

export interface MetricsServerOptions {
  /** HOST:PORT, [IPv6]:PORT, or a PORT alone (on 127.0.0.1); port 0 picks a free one. */
  readonly listen: string;
  /** The command-line flag that set `listen`, named in errors. @defaultValue '--metrics' */
  readonly flag?: string;
}

export interface MetricsServer {
  /** http://HOST:PORT/metrics */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  close(): Promise<void>;
}

/** Limits of the exposition server; Prometheus needs a fraction of each. */
export const METRICS_HTTP_LIMITS = {
  /** Request line and headers together. */
  maxHeaderBytes: 8 * 1024,
  /** Headers must arrive within this time of the connection (or of the previous request). */
  headersTimeoutMs: 5_000,
  /** A whole request, headers and answer. */
  requestTimeoutMs: 10_000,
  /** A socket with no traffic for this long is closed (a reader that stopped reading, too). */
  idleTimeoutMs: 5_000,
  /** Open connections at once; more are refused at accept. */
  maxConnections: 64,
  /** How often Node checks the two timeouts above. */
  checkIntervalMs: 500,
} as const;

const PATH = '/metrics';
/** How long a connection whose request body is refused stays open after the answer: long enough for a client on a
 * loaded machine to read it before the reset that closing on unread data sends. */
const BODY_LINGER_MS = 2000;

/** Splits the --metrics value; a port alone binds loopback. */
export function parseMetricsAddress(text: string, flag = '--metrics'): { host: string; port: number } {
  const match = /^(?:(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]+)):)?(\d{1,5})$/.exec(text);
  const port = Number(match?.[3]);
  if (match === null || port > 65535) {
    throw new MetricsListenError(
      `${flag} ${JSON.stringify(text)} is not HOST:PORT; use e.g. 127.0.0.1:9464 or [::1]:9464`,
    );
  }
  return { host: match[1] ?? match[2] ?? '127.0.0.1', port };
}

/** Serves `exposition` at http://HOST:PORT/metrics until close(). */
export async function startMetricsServer(
  exposition: Exposition,
  options: MetricsServerOptions,
): Promise<MetricsServer> {
  const flag = options.flag ?? '--metrics';
  const { host, port } = parseMetricsAddress(options.listen, flag);
  const limits = METRICS_HTTP_LIMITS;
  const scrape = singleFlight(() => exposition.metrics());
  const server = createServer(
    {
      maxHeaderSize: limits.maxHeaderBytes,
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      keepAliveTimeout: limits.idleTimeoutMs,
      connectionsCheckingInterval: limits.checkIntervalMs,
    },
    (request, response) => {
      if (announcesBody(request)) refuseBody(request);
      else void answer(request, response, exposition.contentType, scrape);
    },
  );
  server.maxConnections = limits.maxConnections;
  // No traffic either way for this long (a reader that stopped reading included): the socket is dropped.
  server.on('connection', (socket: Socket) => socket.setTimeout(limits.idleTimeoutMs, () => socket.destroy()));
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error) => reject(listenError(error, host, port, flag)));
    server.listen(port, host, () => resolve());
  });
  const address = server.address();
  const bound = typeof address === 'object' && address !== null ? address.port : port;
  const urlHost = host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${urlHost}:${bound}${PATH}`,
    host,
    port: bound,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** A request the path and method refuse, with its status and text; null for a scrape. */
function refusal(request: IncomingMessage): { status: 400 | 404 | 405; text: string } | null {
  const path = (request.url ?? '').split('?', 1)[0];
  if (path !== PATH) return { status: 404, text: `not found: the metrics are at ${PATH}\n` };
  if (request.method !== 'GET' && request.method !== 'HEAD') {
    return { status: 405, text: `method not allowed: ${PATH} answers GET and HEAD\n` };
  }
  return null;
}

function announcesBody(request: IncomingMessage): boolean {
  return request.headers['content-length'] !== undefined || request.headers['transfer-encoding'] !== undefined;
}

/**
 * Bodies are never read. A request that announces one gets its answer written on the socket directly, which then
 * stops reading and half-closes; it is destroyed after BODY_LINGER_MS. Node's own response would destroy the
 * socket as soon as the answer is written, and the reset that closing on unread data sends can make the client's
 * kernel drop the answer before the client reads it.
 */
function refuseBody(request: IncomingMessage): void {
  const { socket } = request;
  const { status, text } = refusal(request) ?? { status: 400, text: `a request to ${PATH} carries no body\n` };
  const reason = { 400: 'Bad Request', 404: 'Not Found', 405: 'Method Not Allowed' }[status];
  socket.pause();
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\ncontent-type: text/plain; charset=utf-8\r\n` +
      `content-length: ${Buffer.byteLength(text)}\r\n${status === 405 ? 'allow: GET, HEAD\r\n' : ''}` +
      `connection: close\r\n\r\n${text}`,
  );
  setTimeout(() => socket.destroy(), BODY_LINGER_MS).unref();
}

async function answer(
  request: IncomingMessage,
  response: ServerResponse,
  contentType: string,
  scrape: () => Promise<string>,
): Promise<void> {
  const refused = refusal(request);
  if (refused !== null) {
    if (refused.status === 405) response.setHeader('allow', 'GET, HEAD');
    return plain(response, refused.status, refused.text);
  }
  let text: string;
  try {
    text = await scrape();
  } catch {
    // The reason (a store error, say) is the worker's to report; a scraper learns only that this one failed.
    return plain(response, 500, 'collecting the metrics failed\n');
  }
  response.writeHead(200, { 'content-type': contentType, 'content-length': Buffer.byteLength(text) });
  response.end(request.method === 'HEAD' ? undefined : text);
}

function plain(response: ServerResponse, status: number, text: string): void {
  response.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  response.end(text);
}

/** Calls made while one is running share its result. */
function singleFlight<T>(run: () => Promise<T>): () => Promise<T> {
  let running: Promise<T> | null = null;
  return () => {
    running ??= run().finally(() => (running = null));
    return running;
  };
}

function listenError(error: unknown, host: string, port: number, flag: string): MetricsListenError {
  const code = (error as NodeJS.ErrnoException).code;
  const why =
    code === 'EADDRINUSE'
      ? 'the address is in use'
      : code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND' || code === 'EAI_AGAIN'
        ? 'no such local address'
        : code === 'EACCES'
          ? 'permission denied (ports below 1024 need privileges)'
          : error instanceof Error
            ? error.message
            : String(error);
  return new MetricsListenError(
    `cannot serve metrics on ${host}:${port}: ${why}; choose another ${flag} HOST:PORT`,
    error,
  );
}
