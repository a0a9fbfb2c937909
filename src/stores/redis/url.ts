/**
 * `redis://[user:password@]host[:port][/db][?prefix=...]`, and `rediss://` for
 * TLS (`&ca=FILE` trusts a CA besides the system's). With `cluster=true` the
 * hosts (one or more, comma-separated) are seed nodes of a Redis Cluster. The
 * user, password and options may be percent-encoded.
 */
import { parseUrlOptions, readCaFile, urlRefusal } from '../contract/url-options.js';
import { PREFIX_PATTERN } from './keys.js';

export const DEFAULT_PREFIX = 'kvmq';
const DEFAULT_PORT = 6379;
const FORM =
  'use redis://[user:password@]host[:port][/db][?prefix=...], rediss:// for TLS [&ca=FILE], ' +
  'or redis://host:port,host:port?cluster=true for a Redis Cluster';

export interface RedisNode {
  readonly host: string;
  readonly port: number;
}

export interface RedisUrlOptions {
  /** The server, or a Redis Cluster's seed nodes. */
  readonly nodes: readonly RedisNode[];
  readonly cluster: boolean;
  readonly username: string | undefined;
  readonly password: string | undefined;
  readonly db: number;
  readonly tls: boolean;
  /** PEM of a CA to trust for TLS (the `ca` option), else null: the system's CAs. */
  readonly ca: string | null;
  /** Every key starts with `<prefix>:{<queue>}:`. */
  readonly prefix: string;
  /** host:port/db, for messages (never the password). */
  readonly where: string;
}

const URL_PARTS = /^(rediss?):\/\/(?:([^@/?#]*)@)?([^/?#]*)(?:\/([^?#]*))?(?:\?([^#]*))?$/i;

export function parseRedisUrl(url: string): RedisUrlOptions {
  const fail = (why: string): never => {
    throw urlRefusal(url, why, FORM);
  };
  const parts = URL_PARTS.exec(url);
  if (parts === null) return fail('it is not a redis:// or rediss:// URL');
  const [, scheme = '', auth, hostList = '', path = '', query = ''] = parts;
  const tls = scheme.toLowerCase() === 'rediss';
  const nodes = hostList === '' ? [] : hostList.split(',').map((entry) => parseNode(entry, fail));
  if (nodes.length === 0) fail('it names no host');
  if (path !== '' && !/^\d{1,5}$/.test(path)) fail(`the path must be a database number, got '${path}'`);
  const db = path === '' ? 0 : Number(path);
  const options = parseUrlOptions(url, query, ['prefix', 'ca', 'cluster']);
  const prefix = options.get('prefix') ?? DEFAULT_PREFIX;
  if (!PREFIX_PATTERN.test(prefix)) {
    fail(
      `prefix '${prefix}' must be 1-100 letters, digits or any of _ . : @ - (no braces: they would move the hash tag)`,
    );
  }
  const clusterOption = options.get('cluster') ?? 'false';
  if (clusterOption !== 'true' && clusterOption !== 'false') fail("cluster must be 'true' or 'false'");
  const cluster = clusterOption === 'true';
  if (!cluster && nodes.length > 1) fail('several hosts are the seed nodes of a Redis Cluster: add cluster=true');
  if (cluster && db !== 0) fail('a Redis Cluster has database 0 only');
  const caFile = options.get('ca');
  if (caFile !== undefined && !tls) fail('the ca option needs TLS: use rediss://');
  const ca = readCaFile(caFile, fail);
  const colon = auth === undefined ? -1 : auth.indexOf(':');
  const user = auth === undefined ? '' : colon < 0 ? auth : auth.slice(0, colon);
  const password = auth === undefined || colon < 0 ? '' : auth.slice(colon + 1);
  const shownNodes = nodes.map((n) => `${n.host.includes(':') ? `[${n.host}]` : n.host}:${n.port}`).join(',');
  return {
    nodes,
    cluster,
    username: user === '' ? undefined : decode(user, fail),
    password: password === '' ? undefined : decode(password, fail),
    db,
    tls,
    ca,
    prefix,
    where: `${shownNodes}/${db}`,
  };
}

function parseNode(entry: string, fail: (why: string) => never): RedisNode {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]+))(?::(\d{1,5}))?$/.exec(entry);
  if (match === null) return fail(`'${entry}' is not host[:port]`);
  const port = match[3] === undefined ? DEFAULT_PORT : Number(match[3]);
  if (port < 1 || port > 65535) fail(`port ${port} is out of range`);
  return { host: match[1] ?? match[2] ?? '', port };
}

function decode(text: string, fail: (why: string) => never): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return fail('the user or password has a malformed %-escape');
  }
}
