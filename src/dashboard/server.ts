/**
 * The dashboard on its own HTTP server (`kvmq dashboard`): loopback by default, a token required on any other
 * address, and limits on what one client can hold (header size, slow requests, connections).
 */
import { createServer, type Server } from 'node:http';
import { isIP } from 'node:net';
import type { Client } from '../client/client.js';
import { DashboardServerError } from '../model/errors.js';
import { createDashboard, type Dashboard } from './dashboard.js';
import type { DashboardOptions } from './options.js';

/** The limits of the dashboard's own server; an app mounting the handler sets its own. */
export const DASHBOARD_SERVER_LIMITS = {
  maxHeaderBytes: 16 * 1024,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
  /** How often the header and request deadlines are checked (Node's default is 30 s). */
  checkIntervalMs: 1_000,
  maxConnections: 256,
} as const;

export interface DashboardServerOptions extends DashboardOptions {
  /** HOST:PORT; port 0 picks a free one. @defaultValue '127.0.0.1:7370' */
  readonly listen?: string;
}

export interface RunningDashboard {
  /** http://HOST:PORT/ plus the base path (no token). */
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || (isIP(host) === 4 && host.startsWith('127.'));
}

export function parseDashboardListen(listen: string): { host: string; port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(listen);
  const host = match?.[1] ?? match?.[2];
  const port = Number(match?.[3]);
  if (host === undefined || !Number.isInteger(port) || port > 65535) {
    throw new DashboardServerError(`--listen ${JSON.stringify(listen)} is not HOST:PORT; use e.g. 127.0.0.1:7370`);
  }
  return { host, port };
}

export async function startDashboardServer(
  client: Client,
  options: DashboardServerOptions = {},
): Promise<RunningDashboard> {
  const { listen = '127.0.0.1:7370', ...dashboardOptions } = options;
  const { host, port } = parseDashboardListen(listen);
  if (!isLoopback(host) && dashboardOptions.token === undefined) {
    throw new DashboardServerError(
      `--listen ${listen} is reachable from other machines: give --token (16+ characters) to serve there`,
    );
  }
  const dashboard = createDashboard(client, dashboardOptions);
  const server = createServer(
    {
      maxHeaderSize: DASHBOARD_SERVER_LIMITS.maxHeaderBytes,
      headersTimeout: DASHBOARD_SERVER_LIMITS.headersTimeoutMs,
      requestTimeout: DASHBOARD_SERVER_LIMITS.requestTimeoutMs,
      keepAliveTimeout: DASHBOARD_SERVER_LIMITS.keepAliveTimeoutMs,
      connectionsCheckingInterval: DASHBOARD_SERVER_LIMITS.checkIntervalMs,
    },
    dashboard,
  );
  server.maxConnections = DASHBOARD_SERVER_LIMITS.maxConnections;
  await listenOn(server, host, port, listen);
  const address = server.address();
  const bound = typeof address === 'object' && address !== null ? address.port : port;
  const urlHost = host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${urlHost}:${bound}${dashboardOptions.basePath ?? ''}/`,
    port: bound,
    close: () => closeServer(server, dashboard),
  };
}

function listenOn(server: Server, host: string, port: number, listen: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) => {
      const why =
        error.code === 'EADDRINUSE'
          ? 'the port is in use; choose another with --listen HOST:PORT'
          : error.code === 'EADDRNOTAVAIL' || error.code === 'ENOTFOUND'
            ? 'no such local address; use one of this machine, e.g. 127.0.0.1'
            : error.message;
      reject(new DashboardServerError(`cannot listen on ${listen}: ${why}`, error));
    });
    server.listen({ host, port }, () => resolve());
  });
}

/** Ends the live streams and every connection: a browser's keep-alive or reconnecting stream must not hold it. */
function closeServer(server: Server, dashboard: Dashboard): Promise<void> {
  dashboard.close();
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}
