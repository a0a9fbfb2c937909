/**
 * Store URLs pick the store. Each store's module (and its client library) is
 * imported only when a URL names it.
 */
import { StoreUrlError } from '../model/errors.js';
import type { Store } from './contract/contract.js';
import { redactUrl } from './contract/url-options.js';

export const DEFAULT_STORE_URL = 'sqlite:./kvmq.db';

interface StoreKind {
  readonly schemes: readonly string[];
  readonly form: string;
  readonly open: (url: string) => Promise<Store>;
}

const STORES: readonly StoreKind[] = [
  {
    schemes: ['sqlite:'],
    form: 'sqlite:PATH[?synchronous=normal|full&busyTimeoutMs=N]   embedded file, e.g. sqlite:./kvmq.db (the default)',
    open: async (url) => (await import('./sqlite/store.js')).openSqliteStore(url),
  },
  {
    schemes: ['redis:', 'rediss:'],
    form: 'redis://[user:password@]host[:port][/db][?prefix=kvmq]   Redis 7+; rediss:// for TLS (&ca=FILE); host,host?cluster=true',
    open: async (url) => (await import('./redis/store.js')).openRedisStore(url),
  },
  {
    schemes: ['zookeeper:'],
    form: 'zookeeper://[user:password@]host:2181[,host2:2181...]/dir[?sessionTimeoutMs=6000]   dir: an existing chroot',
    open: async (url) => (await import('./zookeeper/store.js')).openZookeeperStore(url),
  },
  {
    schemes: ['etcd:', 'etcds:'],
    form: 'etcd://[user:password@]host:2379[,host2:2379...][/prefix][?leaseTtlMs=5000]   etcd v3, etcds:// for TLS (?ca=FILE)',
    open: async (url) => (await import('./etcd/store.js')).openEtcdStore(url),
  },
  {
    schemes: ['postgres:', 'postgresql:'],
    form: 'postgres://[user:password@]host[:port][/database][?schema=kvmq&poolSize=10]   PostgreSQL 13+; &ssl=true or &ca=FILE for TLS',
    open: async (url) => (await import('./postgres/store.js')).openPostgresStore(url),
  },
];

export function acceptedForms(): string {
  return STORES.map((kind) => `  ${kind.form}`).join('\n');
}

/** The store URL to use: the argument, else $KVMQ_STORE, else the embedded default. */
export function resolveStoreUrl(url?: string): string {
  return url ?? process.env.KVMQ_STORE ?? DEFAULT_STORE_URL;
}

export async function openStore(url: string): Promise<Store> {
  const scheme = /^[a-z][a-z0-9+.-]*:/i.exec(url)?.[0].toLowerCase();
  const kind = STORES.find((k) => scheme !== undefined && k.schemes.includes(scheme));
  if (kind === undefined) {
    throw new StoreUrlError(`unknown store URL ${JSON.stringify(redactUrl(url))}; accepted forms:\n${acceptedForms()}`);
  }
  return kind.open(url);
}
