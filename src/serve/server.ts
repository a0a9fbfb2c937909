/**
 * `kvmq serve`: etcd v3's gRPC API on an embedded MVCC store.
 *
 *   const server = await startServer({ dataDir: './kvmq-data', listen: '127.0.0.1:2379' });
 *   // any etcd client at server.url
 *   await server.close();
 */
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { hostname } from 'node:os';
import type { DispatcherLog } from '../stores/etcd/dispatcher/types.js';
import { ServeError, StoreLayoutError } from '../model/errors.js';
import { QueueDispatch } from './dispatch/queues.js';
import { AutoCompactor } from './mvcc/auto-compact.js';
import { Engine } from './engine.js';
import { LayoutError } from './storage/schema.js';
import { createGateway } from './gateway/index.js';
import type { FallbackHandler } from './rpc/http2/fallback.js';
import { listenTransport, type Transport, type TransportTls } from './rpc/http2/listen.js';
import type { RpcSettings } from './rpc/method.js';
import { instrumentTable, type ServeInstruments } from './rpc/instrumented.js';
import { methodTable } from './rpc/table.js';
import { GRPC_OVERHEAD_BYTES } from './rpc/watch.js';

/** The etcd version the server reports: the API level it implements. */
export const ETCD_API_VERSION = '3.4.0';

export interface ServeOptions {
  /** Directory of the database, created when missing. @defaultValue './kvmq-data' */
  readonly dataDir?: string;
  /** HOST:PORT to listen on; port 0 picks a free one. @defaultValue '127.0.0.1:2379' */
  readonly listen?: string;
  /** The member name MemberList reports. @defaultValue 'kvmq' */
  readonly name?: string;
  /** etcd's --max-request-bytes. @defaultValue 1.5 MiB */
  readonly maxRequestBytes?: number;
  /** Interval of watch progress notifications (etcd's default is 10 minutes). */
  readonly progressIntervalMs?: number;
  /** Run the etcds queue dispatcher inside the server. @defaultValue true */
  readonly dispatch?: boolean;
  /**
   * Where the server's and its dispatcher's messages go (storage failures, compaction, deliveries). The
   * server writes nothing to the console itself; `kvmq serve` passes a log to stderr. @defaultValue silence
   */
  readonly log?: DispatcherLog;
  /**
   * Called when a storage failure left the server unable to go on (its state and the file may disagree).
   * `kvmq serve` exits with status 1. @defaultValue the failure goes to `log` and the server closes
   */
  readonly onFatal?: (error: unknown) => void;
  /** etcd's --cert-file: the server's certificate (PEM); with `keyFile`, the server speaks TLS only. */
  readonly certFile?: string;
  /** etcd's --key-file: the server certificate's private key (PEM). */
  readonly keyFile?: string;
  /** etcd's --trusted-ca-file: the CA (PEM) that signs client certificates. */
  readonly trustedCaFile?: string;
  /** etcd's --client-cert-auth: refuse clients without a certificate signed by `trustedCaFile`. @defaultValue false */
  readonly clientCertAuth?: boolean;
  /**
   * Requests on the port that are not gRPC: HTTP/2 with another content-type, and HTTP/1.1.
   * @defaultValue etcd's HTTP/JSON gateway (src/serve/gateway), as etcd serves it beside gRPC
   */
  readonly fallback?: FallbackHandler;
  /**
   * HTTP/1.1 paths served by another handler before the fallback: `kvmq serve` mounts its dashboard at
   * /dashboard/ this way. A request goes to the first mount whose `prefix` (e.g. '/dashboard') it equals or
   * continues with '/'.
   */
  readonly httpMounts?: readonly HttpMount[];
  /**
   * History older than this is compacted away (etcd's periodic auto-compaction); 0 keeps all of it.
   * @defaultValue 1 hour
   */
  readonly autoCompactionRetentionMs?: number;
  /** Told of every call's end and every WAL sync (kvmq serve --metrics). @defaultValue none */
  readonly instruments?: ServeInstruments;
}

export interface HttpMount {
  readonly prefix: string;
  readonly handler: (req: IncomingMessage, res: ServerResponse) => void;
}

export const SERVE_DEFAULTS = {
  dataDir: './kvmq-data',
  listen: '127.0.0.1:2379',
  name: 'kvmq',
  maxRequestBytes: 1.5 * 1024 * 1024,
  progressIntervalMs: 10 * 60 * 1000,
  dispatch: true,
  autoCompactionRetentionMs: 60 * 60 * 1000,
  log: () => undefined,
  clientCertAuth: false,
} as const satisfies Omit<
  Required<ServeOptions>,
  'certFile' | 'keyFile' | 'trustedCaFile' | 'fallback' | 'httpMounts' | 'instruments' | 'onFatal'
>;

export interface RunningServer {
  /** http://HOST:PORT (https:// with TLS), the endpoint to give etcd clients. */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  readonly engine: Engine;
  /** The queue dispatcher running inside, or null when turned off. */
  readonly dispatch: QueueDispatch | null;
  /** Stops listening, applies queued writes and closes the database. */
  close(): Promise<void>;
}

/** Splits HOST:PORT (or [IPv6]:PORT); throws a message that says what to write. */
export function parseListen(listen: string): { host: string; port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(listen);
  const port = Number(match?.[3]);
  const host = match?.[1] ?? match?.[2];
  if (match === null || host === undefined || !Number.isInteger(port) || port > 65535) {
    throw new ServeError(`--listen ${JSON.stringify(listen)} is not HOST:PORT; use e.g. 127.0.0.1:2379 or [::1]:2379`);
  }
  return { host, port };
}

/** The TLS settings from etcd's flags, files read; null for plaintext. */
export function readTls(options: ServeOptions): TransportTls | null {
  const { certFile, keyFile, trustedCaFile } = options;
  const clientCertAuth = options.clientCertAuth ?? SERVE_DEFAULTS.clientCertAuth;
  if (certFile === undefined && keyFile === undefined) {
    if (clientCertAuth || trustedCaFile !== undefined) {
      throw new ServeError('--client-cert-auth and --trusted-ca-file need TLS: give --cert-file and --key-file too');
    }
    return null;
  }
  if (certFile === undefined || keyFile === undefined) {
    throw new ServeError('TLS needs both --cert-file and --key-file');
  }
  if (clientCertAuth && trustedCaFile === undefined) {
    throw new ServeError('--client-cert-auth needs --trusted-ca-file, the CA that signs client certificates');
  }
  const read = (flag: string, file: string): Buffer => {
    try {
      return readFileSync(file);
    } catch (error) {
      throw new ServeError(`cannot read ${flag} ${file}: ${error instanceof Error ? error.message : String(error)}`);
    }
  };
  return {
    cert: read('--cert-file', certFile),
    key: read('--key-file', keyFile),
    ...(trustedCaFile === undefined ? {} : { ca: read('--trusted-ca-file', trustedCaFile) }),
    clientCertAuth,
  };
}

/** Sends HTTP/1.1 requests under a mount's prefix to it, the rest (and all HTTP/2) to the fallback. */
function withMounts(mounts: readonly HttpMount[], fallback: FallbackHandler): FallbackHandler {
  if (mounts.length === 0) return fallback;
  return (req, res) => {
    if (req.httpVersionMajor === 1) {
      const path = (req.url ?? '/').split('?', 1)[0] ?? '/';
      const mount = mounts.find((m) => path === m.prefix || path.startsWith(`${m.prefix}/`));
      if (mount !== undefined) {
        mount.handler(req as IncomingMessage, res as ServerResponse);
        return;
      }
    }
    fallback(req, res);
  };
}

export async function startServer(options: ServeOptions = {}): Promise<RunningServer> {
  const dataDir = options.dataDir ?? SERVE_DEFAULTS.dataDir;
  const { host, port } = parseListen(options.listen ?? SERVE_DEFAULTS.listen);
  const tls = readTls(options);
  const maxRequestBytes = options.maxRequestBytes ?? SERVE_DEFAULTS.maxRequestBytes;
  const log = options.log ?? SERVE_DEFAULTS.log;
  let transport: Transport | null = null;
  let engine: Engine;
  // Set once the server is up: by default a fatal storage failure closes it.
  let closeServer: (() => Promise<void>) | null = null;
  const onFatal =
    options.onFatal ??
    ((error: unknown) => {
      log('error', `cannot continue after a storage failure, closing: ${String(error)}`);
      void closeServer?.().catch(() => undefined);
    });
  try {
    engine = new Engine({ dataDir, onFatal, log });
  } catch (error) {
    if (error instanceof LayoutError) throw new StoreLayoutError(error.message);
    const message = error instanceof Error ? error.message : String(error);
    throw new ServeError(`cannot open the data directory ${dataDir}: ${message}`, error);
  }
  try {
    const urlHost = host.includes(':') ? `[${host}]` : host;
    let clientUrls: string[] = [];
    const settings: RpcSettings = {
      name: options.name ?? SERVE_DEFAULTS.name,
      get clientUrls() {
        return clientUrls;
      },
      version: ETCD_API_VERSION,
      maxRequestBytes,
      progressIntervalMs: options.progressIntervalMs ?? SERVE_DEFAULTS.progressIntervalMs,
    };
    const { instruments } = options;
    const plainTable = methodTable(engine, settings);
    const table = instruments === undefined ? plainTable : instrumentTable(plainTable, instruments);
    if (instruments !== undefined) engine.commit.onSync = (seconds) => instruments.synced(seconds);
    try {
      transport = await listenTransport({
        host,
        port,
        table,
        receiveLimit: maxRequestBytes + GRPC_OVERHEAD_BYTES,
        ...(tls === null ? {} : { tls }),
        fallback: withMounts(options.httpMounts ?? [], options.fallback ?? createGateway(table, { maxRequestBytes })),
      });
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      const why = /EADDRINUSE/.test(message)
        ? 'the address is in use (another etcd or kvmq serve?); choose another --listen'
        : /EADDRNOTAVAIL|ENOTFOUND|EAI_AGAIN/.test(message)
          ? 'no such local address; use an address of this machine, e.g. 127.0.0.1 or 0.0.0.0'
          : message;
      throw new ServeError(`cannot listen on ${host}:${port}: ${why}`, error);
    }
    const url = `${tls === null ? 'http' : 'https'}://${urlHost}:${transport.port}`;
    clientUrls = [url];
    const bound = transport;
    let dispatch: QueueDispatch | null = null;
    if (options.dispatch ?? SERVE_DEFAULTS.dispatch) {
      dispatch = new QueueDispatch(engine, `kvmq-serve@${hostname()}:${bound.port}`, log);
      await dispatch.start();
    }
    const retention = options.autoCompactionRetentionMs ?? SERVE_DEFAULTS.autoCompactionRetentionMs;
    const compactor =
      retention > 0
        ? new AutoCompactor(
            {
              get currentRev() {
                return engine.currentRev;
              },
              get compactRev() {
                return engine.kv.compactRev;
              },
              compact: (revision) => engine.compact({ revision, physical: false }),
            },
            retention,
            (message) => log('warn', message),
          )
        : null;
    let closing: Promise<void> | null = null;
    const close = (): Promise<void> => {
      closing ??= (async () => {
        compactor?.stop();
        await dispatch?.close();
        await bound.close();
        await engine.close();
      })();
      return closing;
    };
    closeServer = close;
    return { url, host, port: bound.port, engine, dispatch, close };
  } catch (error) {
    await transport?.close();
    await engine.close();
    throw error;
  }
}
