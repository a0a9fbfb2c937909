/**
 * `postgres://[user[:password]@]host[:port][/database][?schema=kvmq&poolSize=10&ssl=true&ca=FILE&pooler=transaction]`, or
 * `postgresql://`. kvmq keeps its tables in the schema (created and migrated by kvmq); several kvmq
 * installations can share a database under different schemas. The user, password and database may be
 * percent-encoded.
 */
import { parseUrlOptions, readCaFile, urlRefusal } from '../contract/url-options.js';

export const DEFAULT_SCHEMA = 'kvmq';
const DEFAULT_PORT = 5432;
const DEFAULT_POOL_SIZE = 10;
// The schema's name also names its LISTEN channel (`<schema>.wake`), which PostgreSQL caps at 63 bytes.
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,47}$/;
const FORM =
  'use postgres://[user:password@]host[:port][/database][?schema=kvmq&poolSize=10&ssl=true&ca=FILE&pooler=transaction]';

export interface PostgresUrlOptions {
  readonly host: string;
  readonly port: number;
  readonly user: string | undefined;
  readonly password: string | undefined;
  readonly database: string | undefined;
  readonly schema: string;
  readonly poolSize: number;
  /** TLS: false, or the CA to trust (null: the system's). */
  readonly ssl: false | { readonly ca: string | null };
  /**
   * `transaction`: the URL reaches PostgreSQL through a pooler in transaction mode (PgBouncer), so no session
   * is the client's own: no LISTEN, no session advisory locks (polling-session.ts). `session`: direct, or a
   * pooler that gives each client its own session.
   */
  readonly pooler: 'session' | 'transaction';
  /** host:port/database, for messages (never the password). */
  readonly where: string;
}

export function parsePostgresUrl(url: string): PostgresUrlOptions {
  const fail = (why: string): never => {
    throw urlRefusal(url, why, FORM);
  };
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return fail('it is not a URL');
  }
  if (parsed.protocol !== 'postgres:' && parsed.protocol !== 'postgresql:') fail('it is not a postgres:// URL');
  const host = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
  if (host === '') fail('it names no host');
  const port = parsed.port === '' ? DEFAULT_PORT : Number(parsed.port);
  const path = parsed.pathname.replace(/^\//, '');
  if (path.includes('/')) fail(`the path must be a database name, got '${path}'`);
  const options = parseUrlOptions(url, parsed.search.replace(/^\?/, ''), ['schema', 'poolSize', 'ssl', 'ca', 'pooler']);
  const pooler = options.get('pooler') ?? 'session';
  if (pooler !== 'session' && pooler !== 'transaction') fail("pooler must be 'session' or 'transaction'");
  const schema = options.get('schema') ?? DEFAULT_SCHEMA;
  if (!SCHEMA_NAME.test(schema)) fail(`schema '${schema}' must be 1-48 lower-case letters, digits or _`);
  const poolSize = Number(options.get('poolSize') ?? DEFAULT_POOL_SIZE);
  if (!Number.isInteger(poolSize) || poolSize < 2 || poolSize > 1000)
    fail('poolSize must be a whole number, 2 to 1000');
  const sslOption = options.get('ssl') ?? 'false';
  if (sslOption !== 'true' && sslOption !== 'false') fail("ssl must be 'true' or 'false'");
  const caFile = options.get('ca');
  const ca = readCaFile(caFile, fail);
  const decode = (text: string): string | undefined => {
    if (text === '') return undefined;
    try {
      return decodeURIComponent(text);
    } catch {
      return fail('the user, password or database has a malformed %-escape');
    }
  };
  const database = decode(path);
  return {
    host,
    port,
    user: decode(parsed.username),
    password: decode(parsed.password),
    database,
    schema,
    poolSize,
    pooler: pooler === 'transaction' ? 'transaction' : 'session',
    ssl: sslOption === 'true' || caFile !== undefined ? { ca } : false,
    where: `${host}:${port}/${database ?? '(the user name)'}`,
  };
}
