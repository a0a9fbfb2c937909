/**
 * `@opentelemetry/api`, loaded on the first span: a process that never sends nor handles a message (`kvmq
 * status`, a dashboard) does not pay for its sixty-odd modules. It is CommonJS, so require() loads it
 * synchronously and the spans' code stays synchronous; the API keeps its state in a process-wide global,
 * so this instance sees the SDK an app registered through its own import.
 */
import { createRequire } from 'node:module';

type OtelApi = typeof import('@opentelemetry/api');

let api: OtelApi | null = null;

export function otel(): OtelApi {
  api ??= createRequire(import.meta.url)('@opentelemetry/api') as OtelApi;
  return api;
}
