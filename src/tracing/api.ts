/**
 * `@opentelemetry/api`, loaded on the first span: a process that never sends nor handles a message (`kvmq
 * status`, a dashboard) does not pay for its sixty-odd modules. It is CommonJS, so require() loads it
 * synchronously and the spans' code stays synchronous; the API keeps its state in a process-wide global,
 * so this instance sees the SDK an app registered through its own import.
 *
 * The members kvmq uses are copied out once: the module's exports are getters (as TypeScript compiles
 * re-exports), and reading them on every message cost the hot path more than the spans themselves.
 *
 * It is an optional peer dependency: an app that traces has it installed (its SDK needs it), and kvmq then finds
 * that same copy; without it nothing is traced and no span is built. Installed but with nothing registered
 * (no tracer provider, context manager or propagator), every span would be a no-op, so kvmq does not load it
 * until something is: see otelActive.
 */
import { createRequire } from 'node:module';
import { isMissing } from '../model/optional-package.js';

type OtelModule = typeof import('@opentelemetry/api');

export type OtelApi = Pick<
  OtelModule,
  'trace' | 'context' | 'propagation' | 'SpanKind' | 'SpanStatusCode' | 'ROOT_CONTEXT' | 'INVALID_TRACEID'
>;

let api: OtelApi | null = null;
let installed: boolean | null = null;

/**
 * Where the API keeps what an app registered, process-wide, for every copy of API 1.x to find (its own
 * `Symbol.for('opentelemetry.js.api.<major>')`); absent, or without these fields, until an app registers one.
 */
const REGISTRY = Symbol.for('opentelemetry.js.api.1');
type Registry = Partial<Record<'trace' | 'context' | 'propagation', unknown>>;

/**
 * Whether spans can record or carry anything: the API is installed and an app registered a tracer provider, a
 * context manager or a propagator with it. Read per message from the API's registry without loading the API,
 * so a process that does not trace never loads its sixty-odd modules (tens of milliseconds on its first
 * message) and builds no span; an SDK registered later is seen from the next message on.
 */
export function otelActive(): boolean {
  const registry = (globalThis as { [REGISTRY]?: Registry })[REGISTRY];
  if (registry === undefined) return false;
  if (registry.trace === undefined && registry.context === undefined && registry.propagation === undefined) {
    return false;
  }
  return otelInstalled();
}

/** Whether `@opentelemetry/api` can be loaded; looked for once. Without it every trace is skipped. */
function otelInstalled(): boolean {
  if (installed === null) {
    try {
      otel();
      installed = true;
    } catch (error) {
      if (!isMissing(error, '@opentelemetry/api')) throw error;
      installed = false;
    }
  }
  return installed;
}

export function otel(): OtelApi {
  if (api === null) {
    const m = createRequire(import.meta.url)('@opentelemetry/api') as OtelModule;
    api = {
      trace: m.trace,
      context: m.context,
      propagation: m.propagation,
      SpanKind: m.SpanKind,
      SpanStatusCode: m.SpanStatusCode,
      ROOT_CONTEXT: m.ROOT_CONTEXT,
      INVALID_TRACEID: m.INVALID_TRACEID,
    };
  }
  return api;
}
