/**
 * Connections to Redis with ioredis (imported only when a Redis URL is
 * opened), and the translation of Redis failures into kvmq's errors.
 */
import { isIP } from 'node:net';
import type { ConnectionOptions } from 'node:tls';
import type { Cluster, Redis, RedisOptions } from 'ioredis';
import { importDriver } from '../contract/driver.js';
import { KvmqError, StoreLayoutError, StoreUnavailableError, StoreUrlError } from '../../model/errors.js';
import type { RedisUrlOptions } from './url.js';
import { within } from '../../model/time.js';

// Reconnects back off from 50 ms to this, with jitter.
const MAX_RECONNECT_DELAY_MS = 2000;
// A command waits for this many reconnect attempts (about 10 s) before it fails.
const MAX_RETRIES_PER_REQUEST = 8;
const CONNECT_TIMEOUT_MS = 10_000;
const MIN_REDIS_MAJOR = 7;
// Policies that may evict keys without a TTL, such as a queue's messages.
const EVICTING = /^allkeys-/;

/** One server, or a Redis Cluster (`cluster=true`): both route each script by its keys' slot. */
export type RedisConnection = Redis | Cluster;

function reconnectDelay(times: number): number {
  return Math.min(MAX_RECONNECT_DELAY_MS, 50 * 2 ** Math.min(times, 6)) + Math.random() * 50;
}

/** Options of every connection to one server (each node of a cluster). */
function nodeOptions(url: RedisUrlOptions, name: string) {
  return {
    username: url.username,
    password: url.password,
    db: url.db,
    tls: url.tls ? tlsOptions(url) : undefined,
    connectionName: name,
    connectTimeout: CONNECT_TIMEOUT_MS,
    // A reply lost with its connection is not resent: the caller learns of the failure
    // instead of having an enqueue applied twice (and its own id refused as a duplicate).
    autoResendUnfulfilledCommands: false,
    maxRetriesPerRequest: MAX_RETRIES_PER_REQUEST,
  } satisfies RedisOptions;
}

export function tlsOptions(url: RedisUrlOptions): ConnectionOptions {
  const options: ConnectionOptions = {};
  // SNI takes a host name, and only one: a cluster's nodes are checked by their certificates alone.
  const host = url.nodes[0]?.host ?? '';
  if (!url.cluster && isIP(host) === 0) options.servername = host;
  if (url.ca !== null) options.ca = url.ca;
  return options;
}

async function createConnection(
  url: RedisUrlOptions,
  name: string,
  retry: (times: number) => number | null,
  extra: { lazyConnect: boolean; maxRetriesPerRequest?: number | null; autoResendUnfulfilledCommands?: boolean },
): Promise<RedisConnection> {
  const ioredis = await importDriver('redis', () => import('ioredis'));
  const options = { ...nodeOptions(url, name), ...extra };
  if (url.cluster) {
    const { lazyConnect, ...redisOptions } = options;
    return new ioredis.Cluster(
      url.nodes.map((node) => ({ host: node.host, port: node.port })),
      // A command lost with a node during a failover is not resent either (see nodeOptions).
      { redisOptions, lazyConnect, clusterRetryStrategy: retry, scaleReads: 'master', retryDelayOnFailover: 0 },
    );
  }
  const [node] = url.nodes;
  return new ioredis.Redis({ ...options, host: node?.host, port: node?.port, retryStrategy: retry });
}

/**
 * Opens a connection and checks the server can hold queues: Redis 7 or later
 * (script flags, effects replication) and no eviction of keys without a TTL.
 * A server that cannot be reached or refuses the credentials fails at once.
 */
export async function openConnection(url: RedisUrlOptions, name: string): Promise<RedisConnection> {
  let opened = false;
  let lastError: Error | null = null;
  // Fail fast while opening; once open, reconnect with backoff for as long as the store is open.
  const redis = await createConnection(url, name, (times) => (opened ? reconnectDelay(times) : null), {
    lazyConnect: true,
  });
  const remember = (error: Error): void => {
    lastError = error;
  };
  redis.on('error', remember);
  redis.on('node error', remember);
  try {
    await redis.connect();
    await checkServer(redis, url);
  } catch (error) {
    redis.disconnect();
    throw connectError(url, error, lastError);
  }
  opened = true;
  return redis;
}

// How long a closing connection waits for QUIT's answer before it drops the socket.
const QUIT_WAIT_MS = 2000;

/**
 * Closes a connection: QUIT while the server answers, so replies in flight arrive first; at once otherwise. A
 * connection that retries forever (a subscriber's, a blocking one's) would queue QUIT until the server came
 * back, and a store closed while its server is gone would never finish closing.
 */
export async function closeConnection(redis: RedisConnection): Promise<void> {
  if (redis.status !== 'ready') {
    redis.disconnect();
    return;
  }
  await within(redis.quit(), QUIT_WAIT_MS).catch(() => undefined);
  // Nothing more once QUIT was answered; the socket dropped if it was not.
  redis.disconnect();
}

/**
 * A connection for pub/sub wake-ups: it connects in the background and keeps
 * reconnecting (resubscribing) for as long as the store is open.
 */
export function openSubscriber(url: RedisUrlOptions, name: string): Promise<RedisConnection> {
  return createConnection(url, name, reconnectDelay, { lazyConnect: false, maxRetriesPerRequest: null });
}

/**
 * A connection for a blocking command (the BLPOP of handoffs), in the background as a subscriber's. A command
 * cut off by a reconnect is sent again: otherwise ioredis would neither answer nor fail it, and a BLPOP that
 * is sent again only waits again.
 */
export function openBlocking(url: RedisUrlOptions, name: string): Promise<RedisConnection> {
  return createConnection(url, name, reconnectDelay, {
    lazyConnect: false,
    maxRetriesPerRequest: null,
    autoResendUnfulfilledCommands: true,
  });
}

async function checkServer(redis: RedisConnection, url: RedisUrlOptions): Promise<void> {
  const info = await redis.info('server');
  const version = /^redis_version:(\S+)/m.exec(info)?.[1] ?? '0';
  if (Number(version.split('.')[0]) < MIN_REDIS_MAJOR) {
    throw new StoreUrlError(
      `Redis at ${url.where} is version ${version}; kvmq needs Redis ${MIN_REDIS_MAJOR} or later`,
    );
  }
  const memory = await redis.info('memory').catch(() => '');
  const policy = /^maxmemory_policy:(\S+)/m.exec(memory)?.[1];
  if (policy !== undefined && EVICTING.test(policy)) {
    throw new StoreUrlError(
      `Redis at ${url.where} has maxmemory-policy ${policy}, which may evict queued messages; ` +
        'set maxmemory-policy to noeviction (or a volatile-* policy) to use it for kvmq',
    );
  }
}

function connectError(url: RedisUrlOptions, error: unknown, lastError: Error | null): KvmqError {
  if (error instanceof KvmqError) return error;
  const cause = lastError ?? error;
  const message = cause instanceof Error ? cause.message : String(cause);
  if (/WRONGPASS|NOAUTH|invalid password|invalid username/i.test(message)) {
    return new StoreUrlError(
      `Redis at ${url.where} refused the credentials (${firstLine(message)}); ` +
        'put the right user and password in the store URL: redis://user:password@host:port/db',
    );
  }
  const code = (cause as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ALTNAME/.test(code)) {
    return new StoreUrlError(
      `Redis at ${url.where}: its TLS certificate is not trusted (${firstLine(message)}); ` +
        'give the CA that signed it with &ca=FILE in the store URL, or check the host name',
    );
  }
  if (/wrong version number|packet length too long/i.test(message) && url.tls) {
    return new StoreUrlError(`Redis at ${url.where} does not speak TLS there (${firstLine(message)}); use redis://`);
  }
  if (/DB index is out of range|invalid DB index/i.test(message)) {
    return new StoreUrlError(`Redis at ${url.where} has no database ${url.db}; use a database number it has`);
  }
  return new StoreUnavailableError(
    `cannot reach Redis at ${url.where} (${firstLine(message)}); check that redis-server runs there`,
    cause,
  );
}

/** Turns a failed command into a kvmq error that says what to do. */
export function translate(error: unknown, where: string): Error {
  if (error instanceof KvmqError || !(error instanceof Error))
    return error instanceof Error ? error : new Error(String(error));
  const message = error.message;
  const layout = /KVMQ_LAYOUT (.*?)(?: script: |$)/.exec(message);
  if (layout !== null) {
    return new StoreLayoutError(
      `Redis at ${where}: ${layout[1] ?? ''}; another program writes under this prefix: ` +
        'use another prefix (?prefix=...) or remove that key',
    );
  }
  if (message.startsWith('WRONGTYPE')) {
    return new StoreLayoutError(
      `Redis at ${where}: a key under this prefix holds foreign data (${firstLine(message)})`,
    );
  }
  if (message.startsWith('OOM')) {
    return new StoreUnavailableError(
      `Redis at ${where} is out of memory (maxmemory reached, ${firstLine(message)}); nothing was written: ` +
        'free memory (gc, clear finished queues) or raise maxmemory, then try again',
      error,
    );
  }
  // A script's own command refused by the ACL reads 'The user executing the script can't ...'.
  if (/NOPERM|NOAUTH|The user executing the script can't/.test(message)) {
    return new StoreUrlError(
      `Redis at ${where} refused a command to the store URL's user (${firstLine(message)}); ` +
        "grant it the queue's keys, FCALL and FUNCTION (or EVALSHA and SCRIPT), PUBLISH, SUBSCRIBE and INFO",
    );
  }
  if (
    /READONLY|LOADING|MASTERDOWN|BUSY|TRYAGAIN|CLUSTERDOWN|Connection is closed|ECONN|ETIMEDOUT|EPIPE|max retries|Command timed out/i.test(
      message,
    )
  ) {
    return new StoreUnavailableError(
      `Redis at ${where} is unavailable (${firstLine(message)}); try again later`,
      error,
    );
  }
  return error;
}

function firstLine(message: string): string {
  // A script's error ends with ' script: <sha1>, on @user_script:<line>.', a function's with its name.
  return message.split('\n')[0]?.replace(/ script: (?:[0-9a-f]{40}|kvmq_\w+).*$/, '') ?? message;
}
