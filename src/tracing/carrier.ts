/**
 * The trace context a message carries from its producer to its consumers: W3C `traceparent` and
 * `tracestate` (and whatever else the app's propagator writes), kept in the message's metadata under
 * one reserved key.
 */
import type { Context, Span } from '@opentelemetry/api';
import { otel } from './api.js';
import type { Metadata } from '../model/types.js';

/** The metadata key that holds a message's trace context. */
export const TRACE_METADATA_KEY = 'kvmq.trace';

export type TraceCarrier = Readonly<Record<string, string>>;

/**
 * The fields the installed propagator writes for `span`, or null when it writes none: no SDK (the span's
 * context is invalid) or no propagator. Messages of apps without an SDK so carry nothing extra.
 */
export function carrierOf(span: Span): TraceCarrier | null {
  // Without an SDK the span is the API's invalid no-op one: nothing to carry, and no context to build.
  if (!hasValidContext(span)) return null;
  const { propagation, trace, ROOT_CONTEXT } = otel();
  const carrier: Record<string, string> = {};
  propagation.inject(trace.setSpan(ROOT_CONTEXT, span), carrier);
  return Object.keys(carrier).length > 0 ? carrier : null;
}

/** The span has a real context (an SDK made it). */
export function hasValidContext(span: Span): boolean {
  const { trace, INVALID_TRACEID } = otel();
  const context = span.spanContext();
  // The no-op span's all-zero id, compared before the API's check runs its regular expressions on every message.
  return context.traceId !== INVALID_TRACEID && trace.isSpanContextValid(context);
}

/** The context a message was produced in, or ROOT_CONTEXT when it carries none (or one that is not an object). */
export function producerContext(metadata: Metadata): Context {
  const { propagation, ROOT_CONTEXT } = otel();
  const carrier = metadata[TRACE_METADATA_KEY];
  if (typeof carrier !== 'object' || carrier === null || Array.isArray(carrier)) return ROOT_CONTEXT;
  return propagation.extract(ROOT_CONTEXT, carrier);
}
