/**
 * The consumer's side: a CONSUMER span per handling (`process <queue>`), active while the handler runs
 * so the handler's own spans nest under it, ended once the outcome is stored.
 *
 * Its parent is the message's creation context (the producer's `send` span), and it also links to it.
 * The semantic conventions ask consumer spans to link to each message's creation context; a handling
 * covers exactly one message and would otherwise start a trace of its own, so it takes that context as
 * its parent as well: producer, handling and the handler's spans then read as one trace, and tools that
 * follow only links still find the producer.
 */
import type { Context, Span } from '@opentelemetry/api';
import { otel, otelActive } from './api.js';
import { TRACE_METADATA_KEY, hasValidContext, producerContext } from './carrier.js';
import { ATTR, MESSAGING_SYSTEM, noSdk, tracer } from './tracer.js';
import type { AttemptFinish, ClaimedMessage } from '../stores/contract/contract.js';
import type { FailureReason, Job } from '../model/types.js';

/** What the worker tells a handling's span. */
export interface ProcessTrace {
  /** Calls the handler (a batch's: with its first message's span) with the span active. */
  run<T>(handler: (job: Job) => T | Promise<T>, job: Job): T | Promise<T>;
  /** Notes the attempt's outcome (status ERROR when it failed); returns `finish` unchanged. */
  outcome(finish: AttemptFinish, reason: FailureReason): AttemptFinish;
  /** Ends the span once the outcome is stored, or once the message was taken away (`takenAway`). */
  end(held: { readonly takenAway: boolean; readonly abortReason: Error | null }): void;
}

/** The handling of a message no span records: the handler runs as it is, and nothing else happens. */
export const UNTRACED: ProcessTrace = {
  run: (handler, job) => handler(job),
  outcome: (finish) => finish,
  end: () => undefined,
};

/** Starts the span of one handling, or returns UNTRACED without an SDK. */
export function traceProcess(queue: string, consumerId: string, message: ClaimedMessage): ProcessTrace {
  // The common case, checked before any span is built: no producer's context and no SDK to record one.
  // Without the API installed and in use nothing can record one, whatever the producer carried.
  if (!otelActive() || (!Object.hasOwn(message.metadata, TRACE_METADATA_KEY) && noSdk())) return UNTRACED;
  const { SpanKind, trace } = otel();
  const parent = producerContext(message.metadata);
  const creation = trace.getSpanContext(parent);
  const span = tracer().startSpan(
    `process ${queue}`,
    {
      kind: SpanKind.CONSUMER,
      // Literal keys (not ATTR's): an object of one fixed shape, cheap to build on every handling.
      attributes: {
        'messaging.system': MESSAGING_SYSTEM,
        'messaging.destination.name': queue,
        'messaging.operation.name': 'process',
        'messaging.operation.type': 'process',
        'messaging.message.id': message.id,
        'messaging.client.id': consumerId,
        'messaging.kvmq.message.attempt': message.attempt,
      },
      links: creation === undefined ? undefined : [{ context: creation }],
    },
    parent,
  );
  // No SDK: the API's no-op span. A valid but unsampled span still runs the handler in its context, so
  // the handler's spans follow the same sampling decision.
  if (!span.isRecording() && !hasValidContext(span)) return UNTRACED;
  return new Handling(span, trace.setSpan(parent, span));
}

class Handling implements ProcessTrace {
  private thrown: unknown = undefined;

  constructor(
    private readonly span: Span,
    private readonly active: Context,
  ) {}

  async run<T>(handler: (job: Job) => T | Promise<T>, job: Job): Promise<T> {
    try {
      return await otel().context.with(this.active, handler, undefined, job);
    } catch (error) {
      this.thrown = error;
      throw error;
    }
  }

  outcome(finish: AttemptFinish, reason: FailureReason): AttemptFinish {
    const { span } = this;
    span.setAttribute(ATTR.outcome, finish.outcome);
    if (finish.outcome === 'success' || (finish.outcome === 'retry' && finish.error === null)) return finish;
    if (reason === 'thrown' && this.thrown !== undefined) {
      span.recordException(this.thrown instanceof Error ? this.thrown : (finish.error ?? 'thrown'));
    }
    span.setAttribute(ATTR.errorType, errorType(reason, this.thrown));
    span.setStatus({
      code: otel().SpanStatusCode.ERROR,
      message: firstLine(finish.error ?? `handler returned ${finish.outcome}`),
    });
    return finish;
  }

  end(held: { readonly takenAway: boolean; readonly abortReason: Error | null }): void {
    if (held.takenAway) {
      // The store did not keep this attempt's outcome: another consumer may handle the message again.
      this.span.setAttribute(ATTR.outcome, 'lost');
      this.span.setStatus({ code: otel().SpanStatusCode.ERROR, message: held.abortReason?.message ?? 'lock lost' });
    }
    this.span.end();
  }
}

/** Low-cardinality, as the conventions ask: the thrown error's name, TimeoutError, or _OTHER. */
function errorType(reason: FailureReason, thrown: unknown): string {
  if (reason === 'timeout') return 'TimeoutError';
  if (reason === 'thrown' && thrown instanceof Error) return thrown.name;
  return '_OTHER';
}

/** A thrown error's text is its stack; the status needs its message line. */
function firstLine(text: string): string {
  const end = text.indexOf('\n');
  return end === -1 ? text : text.slice(0, end);
}
