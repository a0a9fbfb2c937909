/** ZooKeeper's error replies, as kvmq names and classifies them. */

/** ZooKeeper's error codes kvmq handles by name. */
export const ZkCode = {
  ConnectionLoss: -4,
  OperationTimeout: -7,
  NoNode: -101,
  NoAuth: -102,
  BadVersion: -103,
  NoChildrenForEphemerals: -108,
  NodeExists: -110,
  NotEmpty: -111,
  SessionExpired: -112,
  InvalidAcl: -114,
  AuthFailed: -115,
  Unimplemented: -6,
  BadArguments: -8,
} as const;

/** Codes after which the request may or may not have been applied, and a retry may succeed. */
export const TRANSIENT: ReadonlySet<number> = new Set([
  ZkCode.ConnectionLoss,
  ZkCode.OperationTimeout,
  ZkCode.SessionExpired,
]);

/** A ZooKeeper error reply, with the operation it came from. */
export class ZkError extends Error {
  constructor(
    readonly code: number,
    readonly codeName: string,
    readonly path: string,
    /** For a multi: the index of the operation that failed. */
    readonly opIndex = -1,
  ) {
    super(`ZooKeeper ${codeName} (${code}) at ${path}`);
    this.name = 'ZkError';
  }

  get transient(): boolean {
    return TRANSIENT.has(this.code);
  }
}

export function isZkError(error: unknown, code?: number): error is ZkError {
  return error instanceof ZkError && (code === undefined || error.code === code);
}
