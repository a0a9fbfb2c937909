/**
 * `etcd://[user:password@]host:port[,host2:port...][/prefix][?options]`, and
 * `etcds://` for TLS. The optional path is a key prefix: every key kvmq reads
 * or writes starts with it (`/prefix/queue/{q}/...`), so several
 * environments can share one etcd.
 */
import { readFileSync } from 'node:fs';
import { parseUrlOptions, urlRefusal } from '../contract/url-options.js';
import { DEFAULT_STALL_MS } from './dispatcher/types.js';

export interface EtcdOptions {
  readonly hosts: readonly string[];
  readonly auth: { readonly user: string; readonly password: string } | null;
  readonly tls: { readonly rootCertificate: Buffer; readonly privateKey?: Buffer; readonly certChain?: Buffer } | null;
  /** Prepended to every key; '' or '/name[/name...]'. */
  readonly prefix: string;
  /** TTL of the session lease that holds this process's consumer registrations and dispatcher claims. */
  readonly leaseTtlMs: number;
  /** A dispatcher with no progress on waiting work for this long resigns (dispatcher/types.ts). */
  readonly dispatcherStallMs: number;
}

export const ETCD_URL_FORM =
  'etcd://[user:password@]host:2379[,host2:2379][/prefix][?leaseTtlMs=5000&dispatcherStallMs=60000], ' +
  'etcds:// for TLS [&ca=FILE&cert=FILE&key=FILE]';

const DEFAULT_LEASE_TTL_MS = 5000;
const OPTIONS = ['leaseTtlMs', 'dispatcherStallMs'];
const PREFIX = /^(\/[A-Za-z0-9_.-]+)*$/;
const HOST = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/;

export function parseEtcdUrl(url: string): EtcdOptions {
  const fail = (why: string): never => {
    throw urlRefusal(url, why, `use ${ETCD_URL_FORM}`);
  };
  const match = /^(etcds?):\/\/([^/?]*)([^?]*)(?:\?(.*))?$/i.exec(url);
  if (match === null) return fail('not an etcd URL');
  const [, scheme = '', authority = '', path = '', query = ''] = match;
  const secure = scheme.toLowerCase() === 'etcds';
  const options = parseUrlOptions(url, query, secure ? [...OPTIONS, 'ca', 'cert', 'key'] : OPTIONS);

  const at = authority.lastIndexOf('@');
  let auth: EtcdOptions['auth'] = null;
  if (at >= 0) {
    const userinfo = authority.slice(0, at);
    const colon = userinfo.indexOf(':');
    if (colon <= 0) fail('give both a user and a password (user:password@)');
    auth = {
      user: decodeURIComponent(userinfo.slice(0, colon)),
      password: decodeURIComponent(userinfo.slice(colon + 1)),
    };
  }
  const hosts = authority.slice(at + 1).split(',');
  for (const host of hosts) {
    const parts = HOST.exec(host);
    if (parts === null || Number(parts[2]) < 1 || Number(parts[2]) > 65535) {
      fail(`'${host}' is not host:port`);
    }
  }

  const prefix = path.replace(/\/+$/, '');
  if (!PREFIX.test(prefix)) fail(`prefix '${path}' may use only letters, digits, '_', '.', '-' and '/'`);

  const ttlText = options.get('leaseTtlMs') ?? String(DEFAULT_LEASE_TTL_MS);
  const leaseTtlMs = Number(ttlText);
  if (!Number.isInteger(leaseTtlMs) || leaseTtlMs < 2000 || leaseTtlMs > 3_600_000) {
    fail(`leaseTtlMs must be a whole number of milliseconds from 2000 (etcd's shortest lease) to 3600000`);
  }

  const stallText = options.get('dispatcherStallMs') ?? String(DEFAULT_STALL_MS);
  const dispatcherStallMs = Number(stallText);
  if (!Number.isInteger(dispatcherStallMs) || dispatcherStallMs < 1000 || dispatcherStallMs > 3_600_000) {
    fail('dispatcherStallMs must be a whole number of milliseconds from 1000 to 3600000');
  }

  let tls: EtcdOptions['tls'] = null;
  if (secure) {
    const read = (name: string): Buffer | undefined => {
      const file = options.get(name);
      if (file === undefined) return undefined;
      try {
        return readFileSync(file);
      } catch (error) {
        return fail(`cannot read ${name} file ${file}: ${error instanceof Error ? error.message : String(error)}`);
      }
    };
    const rootCertificate = read('ca');
    if (rootCertificate === undefined) fail('etcds:// needs ?ca=FILE, the CA certificate that signed the server');
    const privateKey = read('key');
    const certChain = read('cert');
    if ((privateKey === undefined) !== (certChain === undefined))
      fail('give both cert= and key= for a client certificate');
    tls = {
      rootCertificate: rootCertificate ?? Buffer.alloc(0),
      ...(privateKey === undefined ? {} : { privateKey }),
      ...(certChain === undefined ? {} : { certChain }),
    };
  }
  return { hosts, auth, tls, prefix, leaseTtlMs, dispatcherStallMs };
}
