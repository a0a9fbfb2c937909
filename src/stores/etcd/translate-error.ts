/**
 * etcd's errors in kvmq's words, for the etcd3 client adapter and for
 * `kvmq serve`'s in-process KV, which has no client library (`lib` null).
 * Imports the client's types only, so it never loads the library.
 */
import type * as Etcd3 from 'etcd3';
import { KvmqError, StoreAuthError, StoreLimitError, StoreUnavailableError } from '../../model/errors.js';

/** Turns a client or server error into a KvmqError that says what to do. */
export function translateEtcdError(error: unknown, lib: typeof Etcd3 | null, endpoints: string): Error {
  if (error instanceof KvmqError) return error;
  const message = error instanceof Error ? error.message : String(error);
  if (lib !== null && error instanceof lib.EtcdAuthenticationFailedError) {
    return new StoreAuthError(
      `etcd at ${endpoints} refused the user name or password in the store URL; check etcd://user:password@host:port`,
      error,
    );
  }
  if (lib !== null && error instanceof lib.EtcdPermissionDeniedError) {
    return new StoreAuthError(
      `etcd at ${endpoints} denied access: the URL's user needs read-write access to the queue's keys ` +
        `(etcdctl role grant-permission ROLE readwrite --prefix /queue/)`,
      error,
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
    return new StoreLimitError(`etcd refused a kvmq transaction: ${message}`, error);
  }
  return new StoreUnavailableError(`etcd at ${endpoints}: ${message}`, error);
}
