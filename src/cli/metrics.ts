/** `--metrics HOST:PORT` of `kvmq work` and `kvmq serve`: the exposition server, its errors as usage errors. */
import { MetricsListenError } from '../model/errors.js';
import { parseMetricsAddress, startMetricsServer, type Exposition, type MetricsServer } from '../metrics/http.js';
import { UsageError } from './errors.js';
import { note } from './output.js';

export const METRICS_FLAG = '--metrics';

export const METRICS_OPTION_HELP: readonly [string, string] = [
  '--metrics HOST:PORT',
  'serve Prometheus metrics at http://HOST:PORT/metrics (a port alone: on 127.0.0.1)',
];

/** Checks the flag's value before anything starts: a malformed address is a usage error (exit 2). */
export function checkMetricsAddress(value: string | undefined): string | undefined {
  if (value !== undefined) usageOnListenError(() => parseMetricsAddress(value, METRICS_FLAG));
  return value;
}

/** Starts serving; an address taken or not local is a usage error naming the flag (exit 2). */
export async function serveMetrics(exposition: Exposition, listen: string): Promise<MetricsServer> {
  try {
    const server = await startMetricsServer(exposition, { listen, flag: METRICS_FLAG });
    note(`metrics at ${server.url}`);
    return server;
  } catch (error) {
    throw asUsageError(error);
  }
}

function usageOnListenError<T>(run: () => T): T {
  try {
    return run();
  } catch (error) {
    throw asUsageError(error);
  }
}

function asUsageError(error: unknown): unknown {
  return error instanceof MetricsListenError ? new UsageError(error.message) : error;
}
