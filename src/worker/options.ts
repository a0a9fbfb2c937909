import { expBackoff } from '../model/backoff.js';
import { checkWorkerFilters, type WorkerFilter, type WorkerFilters } from '../model/filters.js';
import { MAX_TIMER_MS } from '../model/time.js';
import { WORKER_DEFAULTS } from '../model/worker-defaults.js';
import { checkBoolean, checkCount, checkKnownKeys, checkMs, checkPlainObject } from '../model/validate.js';
import { checkBatchOptions, type BatchOptions, type CheckedBatchOptions } from './batch.js';

/** Where a worker's warnings go. */
export interface Logger {
  warn(message: string): void;
}

export interface MonitorInfo {
  readonly queue: string;
  /** Messages waiting or held, queue-wide. */
  readonly queueSize: number;
  /** Dry runs in a row, queue-wide. */
  readonly dryRuns: number;
  /** Ids this poll claimed (empty on a dry run). */
  readonly claimed: readonly string[];
  /** Messages this worker holds now. */
  readonly inFlight: number;
  /** The worker's logger (option `logger`). */
  readonly logger: Logger;
  /**
   * Takes the turn `name` on this queue: resolves true for at most one caller per `everyMs` across every
   * worker and process on the store (a rate limit kept in the store), false when another took it. One
   * store round trip: call it only when there is something to say, not on every poll.
   * `name`: 1-64 letters, digits, '_', '.' or '-'.
   */
  takeTurn(name: string, everyMs: number): Promise<boolean>;
}

/**
 * Called on every poll; what it returns is ignored, except a promise (a monitor that calls the store through
 * `takeTurn`): the worker does not wait for it on the poll, sends its rejection to `onError`, and waits for it
 * when it stops.
 */
export type Monitor = (info: MonitorInfo) => unknown;

export interface WorkerOptions {
  /** Handlers running at once (Carmine's nthreads). @defaultValue 1 */
  readonly concurrency?: number;
  /**
   * Messages claimed ahead of free handler slots, so the next handler starts
   * without a round trip to the store while earlier results are still on
   * their way. They are locked to this worker while they wait (a slow worker
   * holds them from others); a graceful stop gives back the ones not started.
   * @defaultValue 0
   */
  readonly prefetch?: number;
  /** A message's lock lasts this long; the worker renews it while the handler runs. @defaultValue 30 s */
  readonly lockMs?: number;
  /** Pause after each poll that found work. @defaultValue 0 */
  readonly throttleMs?: number;
  /**
   * Queue-wide pause after the queue runs dry, as a number or a function of
   * the dry runs so far (0..4). Wake-ups from the store end it early, so it
   * bounds how long an idle worker goes without looking. @defaultValue expBackoff
   */
  readonly eoqBackoffMs?: number | ((dryRuns: number) => number);
  /** Called on every poll with the queue's size and dry runs, e.g. `queueSizeMonitor()`. */
  readonly monitor?: Monitor;
  /** This worker's filter values, optionally with a method each. */
  readonly filters?: WorkerFilters;
  /** Take only messages the filters accept. @defaultValue true when `filters` is given, else false */
  readonly respectFilters?: boolean;
  /** A thrown handler error is retried until this attempt; then it is an `error`. @defaultValue 1 */
  readonly maxAttempts?: number;
  /** Backoff before retrying a thrown error, by attempt. @defaultValue expBackoff(attempt) */
  readonly retryBackoffMs?: number | ((attempt: number) => number);
  /**
   * A handler running longer has its `job.signal` aborted and the attempt counts
   * as a thrown error ("timed out after N ms"), retried under `maxAttempts`. Its
   * slot is freed at once and whatever it returns later is discarded. @defaultValue none
   */
  readonly timeoutMs?: number;
  /** Start polling at once. @defaultValue true */
  readonly autoStart?: boolean;
  /**
   * Receives errors the worker recovers from (store unavailable, a monitor or
   * listener that threw), as `error` listeners do. @defaultValue stderr, unless an `error` listener is attached
   */
  readonly onError?: (error: unknown) => void;
  /** Receives the worker's warnings (a monitor's, such as `queueSizeMonitor`). @defaultValue console.warn */
  readonly logger?: Logger;
  /**
   * Fire the queue's schedules (`client.schedule()`) while the worker runs. Every worker may: each slot is
   * enqueued once however many run. @defaultValue true
   */
  readonly schedules?: boolean;
  /**
   * How long `stop()` waits for the store once the handlers have returned (at once, on a second stop): results
   * and releases it has not taken by then are left to their locks, and one error says how many. @defaultValue 5 s
   */
  readonly stopGraceMs?: number;
  /**
   * PostgreSQL only: each handler runs inside a transaction kvmq opens (`job.tx`), and the message's outcome is
   * written in that transaction before it commits; a handler that throws or times out has it rolled back. Any
   * other store refuses it with a TypeError. @defaultValue false
   */
  readonly transactional?: boolean;
}

/** A batch worker's options (`client.worker()` with a BatchHandler): a worker's, and `batch`. */
export interface BatchWorkerOptions extends WorkerOptions {
  /**
   * Hand the handler up to `size` messages at once, waiting at most `waitMs` for a fuller batch. `concurrency`
   * then counts batches: the worker holds up to `concurrency × size + prefetch` messages. Not with `transactional`.
   */
  readonly batch: BatchOptions;
}

/** What the Worker is made with: either kind of options. */
export type AnyWorkerOptions = WorkerOptions & { readonly batch?: BatchOptions };

export interface CheckedWorkerOptions {
  readonly concurrency: number;
  readonly prefetch: number;
  readonly lockMs: number;
  readonly throttleMs: number;
  readonly eoqBackoffMs: (dryRuns: number) => number;
  readonly monitor: Monitor | null;
  readonly filters: Readonly<Record<string, Required<WorkerFilter>>>;
  readonly respectFilters: boolean;
  readonly maxAttempts: number;
  readonly retryBackoffMs: (attempt: number) => number;
  readonly timeoutMs: number | null;
  readonly autoStart: boolean;
  readonly onError: ((error: unknown) => void) | null;
  readonly logger: Logger;
  readonly schedules: boolean;
  readonly stopGraceMs: number;
  readonly transactional: boolean;
  readonly batch: CheckedBatchOptions | null;
}

const KEYS = [
  'concurrency',
  'prefetch',
  'lockMs',
  'throttleMs',
  'eoqBackoffMs',
  'monitor',
  'filters',
  'respectFilters',
  'maxAttempts',
  'retryBackoffMs',
  'timeoutMs',
  'autoStart',
  'onError',
  'logger',
  'schedules',
  'stopGraceMs',
  'transactional',
  'batch',
] as const;

// setTimeout fires at once for anything longer.

// Checked here, where the options' type is known.
WORKER_DEFAULTS satisfies WorkerOptions;

/** Validates at construction: a bad option is a TypeError that says how to fix the call. */
export function checkWorkerOptions(options: AnyWorkerOptions): CheckedWorkerOptions {
  checkKnownKeys('worker', checkPlainObject('worker options', options), KEYS);
  // An option given as undefined means its default, as if left out.
  const given = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) as AnyWorkerOptions;
  const o = { ...WORKER_DEFAULTS, ...given };
  const filters = o.filters === undefined ? {} : checkWorkerFilters(o.filters);
  return {
    concurrency: checkCount('concurrency', o.concurrency, 1, 10_000),
    prefetch: checkCount('prefetch', o.prefetch, 0, 10_000),
    lockMs: checkMs('lockMs', o.lockMs, 100, MAX_TIMER_MS),
    throttleMs: checkMs('throttleMs', o.throttleMs),
    eoqBackoffMs: msFunction('eoqBackoffMs', o.eoqBackoffMs, (n) => expBackoff(n)),
    monitor: optionalFunction('monitor', o.monitor),
    filters,
    respectFilters:
      o.respectFilters === undefined
        ? Object.keys(filters).length > 0
        : checkBoolean('respectFilters', o.respectFilters),
    maxAttempts: checkCount('maxAttempts', o.maxAttempts, 1, 1_000_000),
    retryBackoffMs: msFunction('retryBackoffMs', o.retryBackoffMs, (attempt) => expBackoff(attempt)),
    timeoutMs: o.timeoutMs === undefined ? null : checkMs('timeoutMs', o.timeoutMs, 1, MAX_TIMER_MS),
    autoStart: checkBoolean('autoStart', o.autoStart),
    onError: optionalFunction('onError', o.onError),
    logger: o.logger === undefined ? CONSOLE_LOGGER : checkLogger(o.logger),
    schedules: checkBoolean('schedules', o.schedules),
    stopGraceMs: checkMs('stopGraceMs', o.stopGraceMs, 0, MAX_TIMER_MS),
    transactional: checkBoolean('transactional', o.transactional),
    batch: checkBatchOptions(o.batch),
  };
}

const CONSOLE_LOGGER: Logger = { warn: (message) => console.warn(message) };

function checkLogger(value: unknown): Logger {
  if (typeof value !== 'object' || value === null || typeof (value as Partial<Logger>).warn !== 'function') {
    throw new TypeError('logger must be an object with a warn(message) method, such as console or a pino logger');
  }
  return value as Logger;
}

function msFunction(name: string, value: unknown, fallback: (n: number) => number): (n: number) => number {
  if (value === undefined) return fallback;
  if (typeof value === 'number') {
    checkMs(name, value);
    return () => value;
  }
  if (typeof value === 'function') {
    return (n) => checkMs(`${name}(${n})`, Math.round((value as (n: number) => number)(n)));
  }
  throw new TypeError(`${name} must be milliseconds or a function returning milliseconds`);
}

function optionalFunction<F>(name: string, value: F | undefined): F | null {
  if (value === undefined) return null;
  if (typeof value !== 'function') throw new TypeError(`${name} must be a function`);
  return value;
}
