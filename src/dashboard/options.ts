/** createDashboard's options, checked once at construction. */
import type { Client } from '../client/client.js';
import { checkBoolean, checkCount, checkKnownKeys, checkPlainObject } from '../model/validate.js';

export interface DashboardOptions {
  /**
   * The path the handler is mounted under, e.g. '/kvmq'; links and cookies use it. The handler answers 404 to
   * requests outside it. @defaultValue '' (the root)
   */
  readonly basePath?: string;
  /**
   * When set, every request must carry it: `Authorization: Bearer TOKEN`, or a cookie set by visiting once with
   * `?token=TOKEN`. Without a token, only loopback Host names (and `allowedHosts`) are answered.
   */
  readonly token?: string;
  /** Hides the actions and refuses their POSTs. @defaultValue false */
  readonly readOnly?: boolean;
  /** Host names answered besides loopback ones when there is no token (a reverse proxy's name, say). */
  readonly allowedHosts?: readonly string[];
  /** Live-update (server-sent events) connections at most; more are refused with 503. @defaultValue 64 */
  readonly maxLiveClients?: number;
  /** How often a watched queue's counts are read for live updates. @defaultValue 1000 */
  readonly pollIntervalMs?: number;
  /**
   * A client the pages read from instead (a PostgreSQL read replica's, say); actions still go to the
   * dashboard's own client. Pages then show the replica's view, as far behind as its replication.
   */
  readonly readFrom?: Client;
}

export interface DashboardSettings {
  readonly basePath: string;
  readonly token: string | null;
  readonly readOnly: boolean;
  readonly allowedHosts: ReadonlySet<string>;
  readonly maxLiveClients: number;
  readonly pollIntervalMs: number;
  readonly readFrom: Client | null;
}

const KEYS = ['basePath', 'token', 'readOnly', 'allowedHosts', 'maxLiveClients', 'pollIntervalMs', 'readFrom'] as const;

export function checkDashboardOptions(value: unknown): DashboardSettings {
  const options = checkPlainObject('dashboard options', value) as DashboardOptions;
  checkKnownKeys('createDashboard', options, KEYS);
  return {
    basePath: options.basePath === undefined ? '' : checkBasePath(options.basePath),
    token: options.token === undefined ? null : checkToken(options.token),
    readOnly: options.readOnly === undefined ? false : checkBoolean('readOnly', options.readOnly),
    allowedHosts: new Set((options.allowedHosts ?? []).map(checkHostName)),
    maxLiveClients: options.maxLiveClients === undefined ? 64 : checkCount('maxLiveClients', options.maxLiveClients),
    pollIntervalMs:
      options.pollIntervalMs === undefined ? 1000 : checkCount('pollIntervalMs', options.pollIntervalMs, 50, 60_000),
    readFrom: options.readFrom === undefined ? null : checkClient(options.readFrom),
  };
}

function checkClient(value: unknown): Client {
  if (typeof (value as Partial<Client> | null)?.queueStatus !== 'function') {
    throw new TypeError('readFrom must be a kvmq client, as connect() returns');
  }
  return value as Client;
}

function checkBasePath(value: unknown): string {
  if (typeof value !== 'string' || !/^(\/[A-Za-z0-9._~-]+)*\/?$/.test(value)) {
    throw new TypeError(`basePath must be a URL path such as '/kvmq' (letters, digits, . _ ~ -), got ${String(value)}`);
  }
  return value.replace(/\/$/, '');
}

function checkToken(value: unknown): string {
  if (typeof value !== 'string' || !/^[\x21-\x7e]{16,256}$/.test(value)) {
    throw new TypeError('token must be 16 to 256 printable ASCII characters without spaces');
  }
  return value;
}

function checkHostName(value: unknown): string {
  if (typeof value !== 'string' || !/^[A-Za-z0-9.-]{1,253}$/.test(value)) {
    throw new TypeError(`allowedHosts must hold host names such as 'queues.example.com', got ${String(value)}`);
  }
  return value.toLowerCase();
}
