/**
 * kvmq's tracer and the messaging attributes its spans share, named as OpenTelemetry's messaging
 * semantic conventions name them (kvmq's own under `messaging.kvmq.`).
 *
 * Through `@opentelemetry/api` alone every call here is a no-op: spans record only once the app
 * installs an SDK.
 */
import type { Tracer } from '@opentelemetry/api';
import { version } from '../model/version.js';
import { otel } from './api.js';

let kvmqTracer: Tracer | null = null;

/**
 * One tracer for the process, made on the first span. The API hands out a proxy that finds the SDK when
 * it is registered, even after the tracer was made.
 */
export function tracer(): Tracer {
  kvmqTracer ??= otel().trace.getTracer('kvmq', version());
  return kvmqTracer;
}

/**
 * True while no SDK is registered: the global provider is still the API's proxy, without a delegate. Every
 * span then is a no-op, and a handling without a producer's context can skip building one.
 */
export function noSdk(): boolean {
  // Read as the API's proxy provider shows it (without naming its class, which the API deprecates).
  const provider = otel().trace.getTracerProvider() as { getDelegateTracer?: (name: string) => unknown };
  return typeof provider.getDelegateTracer === 'function' && provider.getDelegateTracer('kvmq') === undefined;
}

export const MESSAGING_SYSTEM = 'kvmq';

/** Attributes set after a span starts (those given at its start are spelled out there, for speed). */
export const ATTR = {
  messageId: 'messaging.message.id',
  batchCount: 'messaging.batch.message_count',
  errorType: 'error.type',
  outcome: 'messaging.kvmq.message.outcome',
} as const;
