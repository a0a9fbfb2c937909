/**
 * node-postgres errors as kvmq errors: a refused login is StoreAuthError, a missing database StoreUrlError,
 * a lost or unreachable server (and PostgreSQL's own "try again" states, a statement_timeout among them)
 * StoreUnavailableError, a write on a read-only standby StoreUrlError, each with a
 * message that says where; the driver's error stays as the cause.
 */
import {
  KvmqError,
  StoreAuthError,
  StoreLayoutError,
  StoreUnavailableError,
  StoreUrlError,
} from '../../model/errors.js';

// SQLSTATE classes and codes that mean "the server is not serving now": connection exceptions, shutdown,
// too many connections, a crash restart, serialization/deadlock retries, and a unique key two transactions
// raced for (the same call again finds the winner's row).
const UNAVAILABLE = /^(08|57P0|53300|40001|40P01|23505)/;
// An undefined table, function or schema: kvmq's schema was dropped or changed under a running store.
const LAYOUT = /^(42P01|42883|3F000)$/;

export function translatePgError(error: unknown, where: string): Error {
  if (error instanceof KvmqError) return error;
  const code = (error as { code?: unknown }).code;
  const message = error instanceof Error ? error.message : String(error);
  if (code === '28P01' || code === '28000') {
    return new StoreAuthError(`PostgreSQL at ${where} refused the login: ${message}`, error);
  }
  if (code === '3D000') {
    return new StoreUrlError(`PostgreSQL at ${where}: ${message}; create it first (CREATE DATABASE)`);
  }
  if (code === '42501') {
    return new StoreAuthError(`PostgreSQL at ${where}: the user may not use kvmq's schema: ${message}`, error);
  }
  if (typeof code === 'string' && LAYOUT.test(code)) {
    return new StoreLayoutError(`PostgreSQL at ${where}: kvmq's tables are not as it made them (${message})`);
  }
  if (code === '57014') {
    // statement_timeout, lock_timeout's kin, or a cancel: the transaction rolled back, so trying again is safe.
    return new StoreUnavailableError(`PostgreSQL at ${where} canceled the statement: ${message}`, error);
  }
  if (code === '25006') {
    return new StoreUrlError(
      `PostgreSQL at ${where} takes no writes (${message}): it is a standby, or default_transaction_read_only is ` +
        'on; write through the primary',
    );
  }
  if (typeof code === 'string' && UNAVAILABLE.test(code)) {
    return new StoreUnavailableError(`PostgreSQL at ${where}: ${message}`, error);
  }
  if (
    (typeof code === 'string' && /^E[A-Z]+$/.test(code)) ||
    /Connection terminated|connection timeout|Client has encountered a connection error|not queryable/i.test(message)
  ) {
    return new StoreUnavailableError(`PostgreSQL at ${where} cannot be reached: ${message}`, error);
  }
  return error instanceof Error ? error : new Error(message);
}
