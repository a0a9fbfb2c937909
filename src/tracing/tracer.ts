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

/** Attributes set after a span starts (those given at its start are spelled out there, for speed). */
export const ATTR = {
  messageId: 'messaging.message.id',
  batchCount: 'messaging.batch.message_count',
  errorType: 'error.type',
  outcome: 'messaging.kvmq.message.outcome',
} as const;
