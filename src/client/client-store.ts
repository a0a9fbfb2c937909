/**
 * The store behind a client, for kvmq's own tests, benches and tools. Not exported from the package:
 * users speak the Client API, never the store contract, so the contract can change without a major version.
 */
import type { Store } from '../stores/contract/contract.js';

// Keyed by the client object; a WeakMap so a closed, dropped client is collected with its store.
const stores = new WeakMap<object, Store>();

/** Called once by the Client constructor. */
export function bindStore(client: object, store: Store): void {
  stores.set(client, store);
}

/** The store `client` speaks to; a TypeError for anything that is not a kvmq client. */
export function storeOf(client: object): Store {
  const store = stores.get(client);
  if (store === undefined) throw new TypeError('storeOf takes a client made by connect()');
  return store;
}
