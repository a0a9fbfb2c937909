/** A worker run until it has handled a number of messages and then found nothing more it may take. */
import type { MonitorInfo, WorkerOptions } from '../../src/index.js';
import type { Harness } from './harness.js';
import { JobLog } from './jobs.js';
import { waitFor } from './wait.js';

/**
 * Runs a worker of `q`, one message at a time, until it has handled `expected` messages and a claim after the
 * last came back empty: what it left was looked at and refused. `dryRun`: that claim must also count as the
 * queue's dry run (monitor's `dryRuns`). Returns what it handled, in order.
 */
export async function handledUntilDry(
  h: Harness,
  q: string,
  expected: number,
  options: WorkerOptions = {},
  { dryRun = false }: { readonly dryRun?: boolean } = {},
): Promise<JobLog> {
  const log = new JobLog();
  const polls: { afterHandled: number; info: MonitorInfo }[] = [];
  h.worker(q, (job) => log.record(job), {
    ...options,
    concurrency: 1,
    monitor: (info) => polls.push({ afterHandled: log.seen.length, info }),
  });
  await log.count(expected);
  const dryAfterLast = (p: (typeof polls)[number]): boolean =>
    p.afterHandled >= expected && p.info.claimed.length === 0 && (!dryRun || p.info.dryRuns > 0);
  await waitFor(() => polls.some(dryAfterLast), { what: 'a dry poll after the handled messages' });
  return log;
}
