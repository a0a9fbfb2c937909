/** kvmq's public API. Everything a user may import is named here. */
export { connect, Client } from './client/client.js';
export type { ConnectOptions, PauseResult } from './client/client.js';
export { Worker } from './worker/worker.js';
export { Queue, type TypedBatchItem } from './client/queue.js';
export { RESULT_MAX_BYTES } from './model/result.js';
export { CANCEL_REASON_MAX_CHARS } from './model/cancel.js';
export type { UpdateOptions } from './model/update.js';
export { queueSizeMonitor } from './worker/size-monitor.js';
export type {
  WorkerOptions,
  BatchWorkerOptions,
  MonitorInfo,
  Monitor,
  Logger,
  WorkerEvents,
  CompletedEvent,
  FailedEvent,
  FailureReason,
  RetryingEvent,
  StalledEvent,
} from './worker/worker.js';
export { expBackoff } from './model/backoff.js';
export { knexTransaction } from './stores/postgres/knex.js';
export type { KnexRaw } from './stores/postgres/knex.js';
export type { ScheduleInfo, ScheduleOptions } from './schedule/define.js';
export type { ScheduleTiming, CronTiming, EveryTiming } from './schedule/timing.js';
export { TRACE_METADATA_KEY } from './tracing/carrier.js';
export type { ExpBackoffOptions } from './model/backoff.js';
export { MESSAGE_STATES } from './model/types.js';
export { FLOW_MAX_NODES } from './model/flow.js';
export type { ChildFailurePolicy, ChildStatus, FlowDependency, FlowIds, FlowNode, FlowTree } from './model/flow.js';
export { QUEUE_EVENT_TYPES } from './model/events.js';
export type { QueueEvent, QueueEventType, StoredEvent } from './model/events.js';
export type { EventPage } from './stores/contract/contract.js';
export type { EventsOptions, EventsStart, WaitForOptions } from './events/options.js';
export type { WaitResult } from './events/wait-for.js';
export type { MetricsOptions, MetricsRegistry } from './metrics/registry.js';
export { HISTORY_LIMIT, errorTail } from './model/history.js';
export type {
  ActionResult,
  AttemptRecord,
  BackoffPolicy,
  BatchItem,
  ConsumerInfo,
  EnqueueAction,
  EnqueueBatchOptions,
  EnqueueOptions,
  EnqueueResult,
  FilterValues,
  GcResult,
  BatchHandler,
  BatchOutcome,
  Handler,
  HandlerResult,
  Job,
  ListedMessage,
  ListOptions,
  ListPage,
  MessageDetails,
  MessagePolicy,
  MessageState,
  MessageStatus,
  Metadata,
  Outcome,
  Payload,
  QueueConfig,
  QueueStatus,
  SqlTransaction,
} from './model/types.js';
export type { FilterMethod, WorkerFilter, WorkerFilters } from './model/filters.js';
export { DEFAULT_STORE_URL } from './stores/url.js';
export {
  PROGRESS_MAX_BYTES,
  LOG_LINE_MAX_BYTES,
  LOG_MAX_LINES,
  LOG_MAX_BYTES,
  REPORT_EVERY_MS,
} from './model/reports.js';
export {
  KVMQ_ERROR_CODES,
  type KvmqErrorCode,
  KvmqError,
  StoreUrlError,
  StoreAuthError,
  StoreLimitError,
  ZookeeperReplyError,
  // eslint-disable-next-line @typescript-eslint/no-deprecated -- kept so that users' instanceof checks still work
  MessageTooLargeError,
  PayloadTooLargeError,
  FilterError,
  StoreUnavailableError,
  StoreLayoutError,
  PackageMissingError,
  ClosedError,
  EventsMissedError,
  TimeoutError,
  MessageGoneError,
  MetricsListenError,
  TransactionError,
  JobReportError,
  ServeError,
  DashboardServerError,
  CanceledError,
  FlowRefusedError,
} from './model/errors.js';
export type { FlowRefusal } from './model/errors.js';
export { createDashboard } from './dashboard/dashboard.js';
export type { Dashboard, DashboardOptions } from './dashboard/dashboard.js';
