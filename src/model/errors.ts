import type { StoredEvent } from './events.js';

/** Every code kvmq raises; docs/api.md's Errors table says when each one happens. */
export const KVMQ_ERROR_CODES = [
  'STORE_URL',
  'STORE_AUTH',
  'STORE_LIMIT',
  'STORE_UNAVAILABLE',
  'STORE_LAYOUT',
  'PACKAGE_MISSING',
  'ZOOKEEPER',
  'PAYLOAD_TOO_LARGE',
  'FILTER',
  'CLOSED',
  'EVENTS_MISSED',
  'TIMEOUT',
  'MESSAGE_GONE',
  'METRICS_LISTEN',
  'SERVE',
  'DASHBOARD',
  'TRANSACTION',
  'JOB_REPORT',
  'CANCELED',
  'FLOW_REFUSED',
] as const;

export type KvmqErrorCode = (typeof KVMQ_ERROR_CODES)[number];

/**
 * Every error kvmq raises on purpose is a KvmqError with a stable `code`.
 * `transient` says whether trying the same call again later may succeed.
 */
export class KvmqError extends Error {
  readonly code: KvmqErrorCode;
  readonly transient: boolean;

  constructor(code: KvmqErrorCode, message: string, options?: { cause?: unknown; transient?: boolean }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.transient = options?.transient ?? false;
  }
}

/** A store URL kvmq cannot use. */
export class StoreUrlError extends KvmqError {
  constructor(message: string) {
    super('STORE_URL', message);
  }
}

/** The store refused the URL's credentials, or they may not read and write kvmq's data. */
export class StoreAuthError extends KvmqError {
  constructor(message: string, cause?: unknown) {
    super('STORE_AUTH', message, { cause });
  }
}

/**
 * A feature needs a package that is not installed: a store's driver, prom-client for metrics (they are optional
 * peer dependencies, installed by the apps that use them).
 */
export class PackageMissingError extends KvmqError {
  /** What needs it: "a redis store", "metrics". */
  readonly feature: string;
  readonly package: string;

  constructor(feature: string, name: string, cause?: unknown) {
    super('PACKAGE_MISSING', `${feature} needs the '${name}' package: npm install ${name}`, { cause });
    this.feature = feature;
    this.package = name;
  }
}

/** The store refused a request as over one of its own limits (etcd: operations or bytes per transaction). */
export class StoreLimitError extends KvmqError {
  constructor(message: string, cause?: unknown) {
    super('STORE_LIMIT', message, { cause });
  }
}

/** A ZooKeeper reply no operation expected. `transient` follows the reply's kind (connection loss is). */
export class ZookeeperReplyError extends KvmqError {
  constructor(message: string, cause: unknown, transient: boolean) {
    super('ZOOKEEPER', message, { cause, transient });
  }
}

/**
 * What a call asked to store is over the store's limit. Nothing was written. `part` says what is over it:
 * the `payload` (every store's maxPayloadBytes), or the whole `message`, payload with its metadata
 * (ZooKeeper's packet limit), whose `id` it carries.
 */
export class PayloadTooLargeError extends KvmqError {
  readonly part: 'payload' | 'message';
  /** The message's id, when `part` is `message`. */
  readonly id: string | undefined;
  readonly bytes: number;
  readonly limit: number;

  constructor(bytes: number, limit: number, message?: { id: string }) {
    super(
      'PAYLOAD_TOO_LARGE',
      message === undefined
        ? `payload is ${bytes} bytes, over this store's limit of ${limit} bytes; ` +
            'store large data elsewhere and enqueue a reference to it'
        : `message ${message.id} with its metadata is ${bytes} bytes, over the store's packet limit ` +
            `(${limit} bytes here); make the payload or metadata smaller`,
    );
    this.part = message === undefined ? 'payload' : 'message';
    this.id = message?.id;
    this.bytes = bytes;
    this.limit = limit;
  }
}

/**
 * @deprecated The same class as PayloadTooLargeError (code `PAYLOAD_TOO_LARGE`, `part` `message`), kept so
 * that `instanceof MessageTooLargeError` still works.
 */
export const MessageTooLargeError = PayloadTooLargeError;
/** @deprecated PayloadTooLargeError. */
export type MessageTooLargeError = PayloadTooLargeError;

/** A filter name or value the queue's configuration does not declare. */
export class FilterError extends KvmqError {
  constructor(message: string) {
    super('FILTER', message);
  }
}

/** The store could not be reached or failed; the call may succeed later. */
export class StoreUnavailableError extends KvmqError {
  constructor(message: string, cause?: unknown) {
    super('STORE_UNAVAILABLE', message, { cause, transient: true });
  }
}

/** The store holds data kvmq did not write, or a layout it does not know. */
export class StoreLayoutError extends KvmqError {
  constructor(message: string) {
    super('STORE_LAYOUT', message);
  }
}

/** The client or worker was closed. */
export class ClosedError extends KvmqError {
  constructor(what: string) {
    super('CLOSED', `${what} is closed`);
  }
}

/**
 * A reader of queue events fell behind their retention: events it had not read were trimmed. `events` are the
 * oldest ones still kept (the page that found the gap) and `cursor` reads on after them.
 */
export class EventsMissedError extends KvmqError {
  readonly queue: string;
  readonly events: readonly StoredEvent[];
  readonly cursor: string;

  constructor(queue: string, events: readonly StoredEvent[], cursor: string) {
    super(
      'EVENTS_MISSED',
      `events of queue '${queue}' were trimmed before they were read (eventsMaxCount or eventsMaxAgeMs); ` +
        'handle error.events, then read on with { after: error.cursor }',
    );
    this.queue = queue;
    this.events = events;
    this.cursor = cursor;
  }
}

/** A wait did not end within its timeout. */
export class TimeoutError extends KvmqError {
  constructor(message: string) {
    super('TIMEOUT', message, { transient: true });
  }
}

/** The message is not in the queue: never enqueued, removed, or already garbage-collected. */
export class MessageGoneError extends KvmqError {
  readonly queue: string;
  readonly id: string;

  constructor(queue: string, id: string) {
    super(
      'MESSAGE_GONE',
      `message '${id}' is not in queue '${queue}': never enqueued, removed, or already garbage-collected`,
    );
    this.queue = queue;
    this.id = id;
  }
}

/** The metrics address cannot be served on (taken, not local, malformed). */
export class MetricsListenError extends KvmqError {
  constructor(message: string, cause?: unknown) {
    super('METRICS_LISTEN', message, { cause });
  }
}

/**
 * The caller's SQL transaction cannot take kvmq's statements: it is not open (no BEGIN), or it is aborted (an
 * earlier statement failed; only ROLLBACK helps). Nothing was enqueued.
 */
export class TransactionError extends KvmqError {
  constructor(message: string, cause?: unknown) {
    super('TRANSACTION', message, { cause });
  }
}

/**
 * A handler's `job.progress()` or `job.log()` was given what cannot be stored: a value that is not JSON-encodable
 * or is too large, a log line that is not a string. Nothing of that call was recorded.
 */
export class JobReportError extends KvmqError {
  constructor(message: string) {
    super('JOB_REPORT', message);
  }
}

/** The server could not start: a data directory it cannot use, an address taken. */
export class ServeError extends KvmqError {
  constructor(message: string, cause?: unknown) {
    super('SERVE', message, { cause });
  }
}

/** The dashboard server could not start: an address not allowed without a token, or one in use. */
export class DashboardServerError extends KvmqError {
  constructor(message: string, cause?: unknown) {
    super('DASHBOARD', message, { cause });
  }
}

/**
 * Why a handler's `job.signal` was aborted when its message was canceled (`client.cancel`): the message is failed
 * already, and whatever the handler returns is not stored.
 */
export class CanceledError extends KvmqError {
  readonly queue: string;
  readonly id: string;

  constructor(queue: string, id: string) {
    super('CANCELED', `message '${id}' of queue '${queue}' was canceled`);
    this.queue = queue;
    this.id = id;
  }
}

/**
 * Why a flow was refused: a node's id `exists` in its queue; a dependency (`dependsOn`) is `missing` (gone, or
 * never was), `has-parent` (a message has one parent), or `failed` under an `onChildFailure` other than `ignore`
 * (its parent could only be written failed).
 */
export type FlowRefusal = 'exists' | 'missing' | 'has-parent' | 'failed';

const FLOW_REFUSALS: Readonly<Record<FlowRefusal, string>> = {
  exists: 'exists',
  missing: 'is named in dependsOn but does not exist',
  'has-parent': 'is named in dependsOn but already has a parent',
  failed: 'is named in dependsOn but failed, and its onChildFailure is not ignore',
};

/**
 * A flow was not written, not one of its messages, because of this message (`reason`): its id exists in its
 * queue, or it is a dependency the flow cannot take. `state` is its state (`none` for a missing one).
 */
export class FlowRefusedError extends KvmqError {
  readonly queue: string;
  readonly id: string;
  readonly state: string;
  readonly reason: FlowRefusal;

  constructor(queue: string, id: string, state: string, reason: FlowRefusal = 'exists') {
    super('FLOW_REFUSED', `flow not written: message '${id}' of queue '${queue}' ${FLOW_REFUSALS[reason]} (${state})`);
    this.queue = queue;
    this.id = id;
    this.state = state;
    this.reason = reason;
  }
}
