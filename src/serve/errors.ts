/**
 * The errors the server answers with: etcd's gRPC status codes and exact
 * messages, because etcd clients map those strings to their own error types
 * (a client that sees "etcdserver: requested lease not found" knows the lease
 * is gone; any other text is an unknown failure to it).
 */

export const Code = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  NOT_FOUND: 5,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;

/** An error answered to the client as a gRPC status. */
export class EtcdError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
    this.name = 'EtcdError';
  }
}

function e(code: number, message: string): () => EtcdError {
  return () => new EtcdError(code, message);
}

export const Errors = {
  emptyKey: e(Code.INVALID_ARGUMENT, 'etcdserver: key is not provided'),
  keyNotFound: e(Code.INVALID_ARGUMENT, 'etcdserver: key not found'),
  valueProvided: e(Code.INVALID_ARGUMENT, 'etcdserver: value is provided'),
  leaseProvided: e(Code.INVALID_ARGUMENT, 'etcdserver: lease is provided'),
  tooManyOps: e(Code.INVALID_ARGUMENT, 'etcdserver: too many operations in txn request'),
  duplicateKey: e(Code.INVALID_ARGUMENT, 'etcdserver: duplicate key given in txn request'),
  compacted: e(Code.OUT_OF_RANGE, 'etcdserver: mvcc: required revision has been compacted'),
  futureRev: e(Code.OUT_OF_RANGE, 'etcdserver: mvcc: required revision is a future revision'),
  noSpace: e(Code.RESOURCE_EXHAUSTED, 'etcdserver: mvcc: database space exceeded'),
  leaseNotFound: e(Code.NOT_FOUND, 'etcdserver: requested lease not found'),
  leaseExist: e(Code.FAILED_PRECONDITION, 'etcdserver: lease already exists'),
  leaseTtlTooLarge: e(Code.OUT_OF_RANGE, 'etcdserver: too large lease TTL'),
  requestTooLarge: e(Code.INVALID_ARGUMENT, 'etcdserver: request is too large'),
  memberNotFound: e(Code.NOT_FOUND, 'etcdserver: member not found'),
  rootUserNotExist: e(Code.FAILED_PRECONDITION, 'etcdserver: root user does not exist'),
  rootRoleNotExist: e(Code.FAILED_PRECONDITION, 'etcdserver: root user does not have root role'),
  userAlreadyExist: e(Code.FAILED_PRECONDITION, 'etcdserver: user name already exists'),
  userEmpty: e(Code.INVALID_ARGUMENT, 'etcdserver: user name is empty'),
  userNotFound: e(Code.FAILED_PRECONDITION, 'etcdserver: user name not found'),
  roleAlreadyExist: e(Code.FAILED_PRECONDITION, 'etcdserver: role name already exists'),
  roleNotFound: e(Code.FAILED_PRECONDITION, 'etcdserver: role name not found'),
  roleEmpty: e(Code.INVALID_ARGUMENT, 'etcdserver: role name is empty'),
  authFailed: e(Code.INVALID_ARGUMENT, 'etcdserver: authentication failed, invalid user ID or password'),
  permissionDenied: e(Code.PERMISSION_DENIED, 'etcdserver: permission denied'),
  roleNotGranted: e(Code.FAILED_PRECONDITION, 'etcdserver: role is not granted to the user'),
  permissionNotGranted: e(Code.FAILED_PRECONDITION, 'etcdserver: permission is not granted to the role'),
  authNotEnabled: e(Code.FAILED_PRECONDITION, 'etcdserver: authentication is not enabled'),
  invalidAuthToken: e(Code.UNAUTHENTICATED, 'etcdserver: invalid auth token'),
  invalidAuthMgmt: e(Code.INVALID_ARGUMENT, 'etcdserver: invalid auth management'),
  authOldRevision: e(Code.INVALID_ARGUMENT, 'etcdserver: revision of auth store is old'),
  notCapable: e(Code.UNAVAILABLE, 'etcdserver: not capable'),
  stopped: e(Code.UNAVAILABLE, 'etcdserver: server stopped'),
  watchCanceled: e(Code.CANCELLED, 'etcdserver: watch canceled'),
  noLeader: e(Code.UNAVAILABLE, 'etcdserver: no leader'),
  notLeader: e(Code.FAILED_PRECONDITION, 'etcdserver: not leader'),
} as const;

/** grpc-go's own message for a request past the receive limit, which etcd clients see from etcd. */
export function messageTooLarge(size: number, limit: number): EtcdError {
  return new EtcdError(Code.RESOURCE_EXHAUSTED, `grpc: received message larger than max (${size} vs. ${limit})`);
}

/** Watch cancel reasons are etcd's mvcc error texts, without the "etcdserver: " prefix. */
export const WatchCancelReason = {
  emptyRange: 'mvcc: watcher range is empty',
  duplicateId: 'mvcc: duplicate watch ID provided on the WatchStream',
} as const;
