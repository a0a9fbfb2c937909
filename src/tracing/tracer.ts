/**
 * kvmq's tracer and the messaging attributes its spans share, named as OpenTelemetry's messaging
 * semantic conventions name them (kvmq's own under `messaging.kvmq.`).
 *
 * Through `@opentelemetry/api` alone every call here is a no-op: spans record only once the app
 * installs an SDK.
 */
import { trace } from '@opentelemetry/api';
import { version } from '../cli/version.js';

/**
 * One tracer for the process. The API hands out a proxy that finds the SDK when it is registered,
 * even after this module loaded.
 */
export const tracer = trace.getTracer('kvmq', version());

export const MESSAGING_SYSTEM = 'kvmq';

export const ATTR = {
  system: 'messaging.system',
  destination: 'messaging.destination.name',
  operationName: 'messaging.operation.name',
  operationType: 'messaging.operation.type',
  messageId: 'messaging.message.id',
  batchCount: 'messaging.batch.message_count',
  clientId: 'messaging.client.id',
  errorType: 'error.type',
  attempt: 'messaging.kvmq.message.attempt',
  outcome: 'messaging.kvmq.message.outcome',
} as const;
