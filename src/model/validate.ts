/**
 * Checks of names and options at the API boundary. A bad call throws a
 * TypeError that says how to fix it, before anything touches the store.
 */

const QUEUE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
// Ids become ZooKeeper node names, etcd key segments and Redis hash fields.
const MESSAGE_ID = /^[A-Za-z0-9_.:@+=-]{1,256}$/;
const FILTER_TOKEN = /^[A-Za-z0-9_.-]{1,64}$/;

export function checkQueueName(queue: unknown): string {
  if (typeof queue !== 'string' || !QUEUE_NAME.test(queue)) {
    throw new TypeError(
      `queue name ${JSON.stringify(queue)} is invalid: use 1-128 letters, digits, '_', '.' or '-', ` +
        'starting with a letter or digit',
    );
  }
  return queue;
}

export function checkMessageId(id: unknown): string {
  if (typeof id !== 'string' || !MESSAGE_ID.test(id)) {
    throw new TypeError(
      `message id ${JSON.stringify(id)} is invalid: use 1-256 letters, digits or any of _ . : @ + = -`,
    );
  }
  return id;
}

export function checkFilterToken(kind: 'name' | 'value', token: unknown): string {
  if (typeof token !== 'string' || !FILTER_TOKEN.test(token)) {
    throw new TypeError(
      `filter ${kind} ${JSON.stringify(token)} is invalid: use 1-64 letters, digits, '_', '.' or '-'`,
    );
  }
  return token;
}

/** A whole number of milliseconds within [min, max]. */
/** A turn's name (Store.takeTurn): it becomes part of a key or node name in every store. */
export function checkTurnName(name: unknown): string {
  if (typeof name !== 'string' || !FILTER_TOKEN.test(name)) {
    throw new TypeError(`turn name ${JSON.stringify(name)} is invalid: use 1-64 letters, digits, '_', '.' or '-'`);
  }
  return name;
}

export function checkMs(name: string, value: unknown, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new TypeError(`${name} must be a whole number of milliseconds from ${min} to ${max}, got ${String(value)}`);
  }
  return value;
}

export function checkCount(name: string, value: unknown, min = 1, max = 100_000): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new TypeError(`${name} must be a whole number from ${min} to ${max}, got ${String(value)}`);
  }
  return value;
}

export function checkBoolean(name: string, value: unknown): boolean {
  if (typeof value !== 'boolean') throw new TypeError(`${name} must be true or false, got ${String(value)}`);
  return value;
}

export function checkPlainObject(name: string, value: unknown): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new TypeError(`${name} must be a plain object, got ${value === null ? 'null' : typeof value}`);
  }
  return value as Record<string, unknown>;
}

/**
 * Throws on keys the caller did not mean: a typo in an option name should not pass silently. `what` begins the
 * message, unless empty (the caller names the place itself).
 */
export function checkKnownKeys(what: string, value: object, known: readonly string[]): void {
  for (const key of Object.keys(value)) {
    if (!known.includes(key)) {
      const where = what === '' ? '' : `${what}: `;
      throw new TypeError(`${where}unknown option '${key}'; known options are ${known.join(', ')}`);
    }
  }
}

/**
 * The record's own value for `key`. Filter names are user input: a plain
 * index would find `constructor` or `__proto__` on every object.
 */
export function own<T>(record: Readonly<Record<string, T>>, key: string): T | undefined {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}
