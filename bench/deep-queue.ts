/**
 * What the deep-queue benches share (failures.ts, dashboard.ts): their common options, and the backlog of queued
 * messages they time against, built after their failed messages so those sit at its far end.
 */
import { connect, type Client } from '../src/index.js';
import { storeOf } from '../src/client/client-store.js';
import { fill, timed } from './common.js';

/** parseArgs options: --store, --backlog (1,000,000), --failed (100), --runs (20). */
export const DEEP_QUEUE_OPTIONS = {
  store: { type: 'string' },
  backlog: { type: 'string', default: '1000000' },
  failed: { type: 'string', default: '100' },
  runs: { type: 'string', default: '20' },
} as const;

/** A client without maintenance (the bench times only its own calls), and its store's kind for the table. */
export async function benchClient(url: string | undefined): Promise<{ client: Client; kind: string }> {
  const client = await connect(url, { maintenance: false });
  return { client, kind: storeOf(client).kind };
}

/** Enqueues `backlog` messages to `queue`, saying on stderr how long it took. */
export async function buildBacklog(client: Client, kind: string, queue: string, backlog: number): Promise<void> {
  process.stderr.write(`${kind}: a backlog of ${backlog} queued messages...\n`);
  const buildMs = await timed(() => fill(client, queue, backlog, 1000));
  process.stderr.write(`${kind}: built in ${(buildMs / 1000).toFixed(1)} s; timing\n`);
}
