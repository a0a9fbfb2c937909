/**
 * The producer's side: a PRODUCER span per enqueue call (`send <queue>`), whose context each message
 * carries to its consumers in its metadata.
 */
import type { Attributes, Span } from '@opentelemetry/api';
import { otel, otelActive } from './api.js';
import { TRACE_METADATA_KEY, carrierOf, producerContext, type TraceCarrier } from './carrier.js';
import { ATTR, MESSAGING_SYSTEM, tracer } from './tracer.js';
import type { NewMessage } from '../stores/contract/contract.js';

/**
 * Sends `messages` under a `send <queue>` span, a child of the caller's active span, ended when `send`
 * settles. `batch`: the call was the batch API (the span then counts the messages rather than naming one).
 */
export function traceSend<R>(
  queue: string,
  messages: readonly NewMessage[],
  batch: boolean,
  send: (messages: readonly NewMessage[]) => Promise<R>,
): Promise<R> {
  if (!otelActive()) return send(messages);
  // Literal keys (not ATTR's): an object of one fixed shape, cheap to build on every call.
  const attributes: Attributes = {
    'messaging.system': MESSAGING_SYSTEM,
    'messaging.destination.name': queue,
    'messaging.operation.name': 'send',
    'messaging.operation.type': 'send',
  };
  if (batch) attributes[ATTR.batchCount] = messages.length;
  else if (messages.length === 1) attributes[ATTR.messageId] = messages[0]?.id;
  const { SpanKind, SpanStatusCode } = otel();
  const span = tracer().startSpan(`send ${queue}`, { kind: SpanKind.PRODUCER, attributes });
  const carrier = carrierOf(span);
  const sent = send(carrier === null ? messages : messages.map((message) => carry(span, message, carrier)));
  // A span that records nothing (no SDK, or sampled out) has nothing to end: no promise to follow.
  if (!span.isRecording()) return sent;
  sent.then(
    () => span.end(),
    (error: unknown) => {
      span.recordException(error instanceof Error ? error : String(error));
      span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
      span.setAttribute(ATTR.errorType, error instanceof Error ? error.name : '_OTHER');
      span.end();
    },
  );
  return sent;
}

/**
 * The message with the span's context in its metadata. A context the app put there itself is kept as
 * given (and linked from the span): the app chose where its consumers' traces hang.
 */
function carry(span: Span, message: NewMessage, carrier: TraceCarrier): NewMessage {
  if (Object.hasOwn(message.metadata, TRACE_METADATA_KEY)) {
    const { trace } = otel();
    const given = trace.getSpanContext(producerContext(message.metadata));
    if (given !== undefined && trace.isSpanContextValid(given)) span.addLink({ context: given });
    return message;
  }
  return { ...message, metadata: { ...message.metadata, [TRACE_METADATA_KEY]: carrier } };
}
