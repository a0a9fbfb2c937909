/**
 * etcd's errors in kvmq's words, for the etcd3 client adapter and for
 * `kvmq serve`'s in-process KV, which has no client library (`lib` null).
 * Imports the client's types only, so it never loads the library.
 */
import type * as Etcd3 from 'etcd3';
import { KvmqError, StoreUnavailableError } from '../errors.js';

/** Turns a client or server error into a KvmqError that says what to do. */
export function translateEtcdError(error: unknown, lib: typeof Etcd3 | null, endpoints: string): Error {
  if (error instanceof KvmqError) return error;
  const message = error instanceof Error ? error.message : String(error);
  if (lib !== null && error instanceof lib.EtcdAuthenticationFailedError) {
    return new KvmqError(
      'STORE_AUTH',
      `etcd at ${endpoints} refused the user name or password in the store URL; check etcd://user:password@host:port`,
      { cause: error },
    );
  }
  if (lib !== null && error instanceof lib.EtcdPermissionDeniedError) {
    return new KvmqError(
      'STORE_AUTH',
      `etcd at ${endpoints} denied access: the URL's user needs read-write access to the queue's keys ` +
        `(etcdctl role grant-permission ROLE readwrite --prefix /queue/)`,
      { cause: error },
    );
  }
  if (/database space exceeded/.test(message)) {
    return new StoreUnavailableError(
      `etcd at ${endpoints} is out of space (NOSPACE alarm): compact its history and defragment ` +
        `(etcdctl compact REV; etcdctl defrag; etcdctl alarm disarm), or run it with --auto-compaction-retention`,
      error,
    );
  }
  if (/too many operations in txn request|request is too large|duplicate key given in txn request/.test(message)) {
    return new KvmqError('STORE_LIMIT', `etcd refused a kvmq transaction: ${message}`, { cause: error });
  }
  return new StoreUnavailableError(`etcd at ${endpoints}: ${message}`, error);
}
