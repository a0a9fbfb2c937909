/**
 * A store's driver, loaded when a URL of that store is opened. The drivers are optional peer dependencies: a
 * user of one store installs one driver, and the embedded SQLite default needs none.
 */
import { importOptional, requireOptional } from '../../model/optional-package.js';

/** The driver package of each store that needs one. */
export const STORE_DRIVERS = {
  redis: 'ioredis',
  zookeeper: 'node-zookeeper-client',
  etcd: 'etcd3',
  postgres: 'pg',
} as const;

export type DriverStore = keyof typeof STORE_DRIVERS;

/** The driver as an ES module import. */
export function importDriver<T>(store: DriverStore, load: () => Promise<T>): Promise<T> {
  return importOptional(STORE_DRIVERS[store], `a ${store} store`, load);
}

/** The driver through require() (CommonJS drivers whose callers stay synchronous). */
export function requireDriver(store: DriverStore): unknown {
  return requireOptional(STORE_DRIVERS[store], `a ${store} store`);
}
