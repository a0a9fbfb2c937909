/**
 * A store's client (an etcd Kv, a ZooKeeper session, a store context) with some of its members replaced, so a
 * test can run another client's write at a chosen point of an operation; every other member is the client's
 * own, its methods bound to it, so each request still goes to the real server.
 */
export function interposed<T extends object>(target: T, overrides: Partial<T>): T {
  return new Proxy(target, {
    get(object, name) {
      if (Object.hasOwn(overrides, name)) return (overrides as Record<PropertyKey, unknown>)[name];
      const value: unknown = Reflect.get(object, name, object);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(object) : value;
    },
  });
}
