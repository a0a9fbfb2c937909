/**
 * A store's driver, loaded when a URL of that store is opened. The drivers are optional peer dependencies
 * (package.json): a user of one store installs one driver, and the embedded SQLite default needs none. A
 * missing one is refused with the package to install, not Node's "cannot find package" from deep inside kvmq.
 */
import { createRequire } from 'node:module';
import { StoreDriverMissingError } from '../errors.js';

/** The driver package of each store that needs one. */
export const STORE_DRIVERS = {
  redis: 'ioredis',
  zookeeper: 'node-zookeeper-client',
  etcd: 'etcd3',
  postgres: 'pg',
} as const;

export type DriverStore = keyof typeof STORE_DRIVERS;

const requireHere = createRequire(import.meta.url);

/** `error` is Node saying `name` itself cannot be found (not a module it loads in turn). */
function isMissing(error: unknown, name: string): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as NodeJS.ErrnoException).code;
  if (code !== 'ERR_MODULE_NOT_FOUND' && code !== 'MODULE_NOT_FOUND') return false;
  return error.message.includes(`'${name}'`) || error.message.includes(`"${name}"`);
}

function missing(store: DriverStore, error: unknown): StoreDriverMissingError {
  return new StoreDriverMissingError(store, STORE_DRIVERS[store], error);
}

/** The driver as an ES module import. */
export async function importDriver<T>(store: DriverStore, load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (error) {
    throw isMissing(error, STORE_DRIVERS[store]) ? missing(store, error) : error;
  }
}

/** The driver through require() (CommonJS drivers whose callers stay synchronous). */
export function requireDriver(store: DriverStore): unknown {
  const name = STORE_DRIVERS[store];
  try {
    return requireHere(name);
  } catch (error) {
    throw isMissing(error, name) ? missing(store, error) : error;
  }
}
