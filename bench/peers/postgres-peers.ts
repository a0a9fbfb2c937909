/**
 * The three queues bench/peers/postgres.ts compares, behind the peer benches' interface (harness.ts):
 * kvmq through its public API, pg-boss and graphile-worker each at the settings its documentation gives
 * for speed (below; bench/peers/postgres.ts's header and its doc section say the same).
 */
import { connect, StoreUrlError } from '../../src/index.js';
import { kvmqFactory, type Payload, type PeerFactory } from './harness.js';

/** Connections each producer's pool may open (pg-boss's `max`, graphile-worker's `maxPoolSize`). */
export const PRODUCER_POOL = 64;

/**
 * Jobs each library's worker holds at once while it drains a backlog: the local queue of graphile-worker's
 * documented performance configuration, and as many for the others (pg-boss's batch, kvmq's concurrency and
 * prefetch), since each drains faster the more it takes a round trip.
 */
export const HELD = 500;

// --- kvmq ------------------------------------------------------------------

/**
 * kvmq at its fastest documented setting: a queue that keeps no successes (`keepDone: 0`) has each removed at its
 * finish on PostgreSQL, as graphile-worker deletes a job that succeeded.
 */
export const KVMQ_CONFIG = { keepDone: 0 } as const;

/** Its worker claims ahead of its free slots (`prefetch`) so that it holds `HELD` messages. */
export const kvmqWorkerOptions = (concurrency: number): { prefetch: number } => ({
  prefetch: Math.max(0, HELD - concurrency),
});

/** kvmq's factory, or why it cannot run: a kvmq without a store for postgres:// URLs says "unknown store". */
export async function kvmqPeer(url: string): Promise<PeerFactory | string> {
  try {
    await (await connect(url, { maintenance: false })).close();
  } catch (error) {
    if (error instanceof StoreUrlError && error.message.startsWith('unknown store URL')) {
      return 'this kvmq has no PostgreSQL store (connect() answered "unknown store URL")';
    }
    throw error;
  }
  return kvmqFactory(url, KVMQ_CONFIG, kvmqWorkerOptions);
}

// --- pg-boss ---------------------------------------------------------------

interface BossJob {
  readonly data: Payload;
}
interface Boss {
  start(): Promise<unknown>;
  stop(options: { graceful: boolean; close: boolean; timeout: number }): Promise<void>;
  on(event: 'error', listener: (error: Error) => void): void;
  createQueue(name: string, options: object): Promise<void>;
  deleteQueue(name: string): Promise<void>;
  send(name: string, data: Payload): Promise<unknown>;
  insert(name: string, jobs: { data: Payload }[]): Promise<unknown>;
  work(name: string, options: object, handler: (jobs: BossJob[]) => Promise<void>): Promise<string>;
  offWork(name: string, options: { wait: boolean }): Promise<void>;
}
export interface BossModule {
  PgBoss: new (options: object) => Boss;
}

const BOSS_SCHEMA = 'pgboss';
/**
 * pg-boss at its fastest documented settings: LISTEN/NOTIFY wake-ups (`useListenNotify`, the queue's
 * `notify`), the shortest polling intervals (0.5 s, with and without notifications), `insert` for
 * batches, no supervision or cron in the bench's instances (kvmq's clients run no maintenance either).
 * Its worker fetches a batch of `HELD` jobs (the handler runs them all) and, while batches come back full, the
 * next one at once (`burstWhenBatchFull`); with the default batch of one it waits out the polling interval
 * after every job. One fetch loop drained faster than several (`localConcurrency`), and a batch of 500 faster
 * than one of 64 (about 31,000 against 20,000 jobs a second).
 */
export function pgBossPeer(url: string, module: BossModule): PeerFactory {
  return async (queue) => {
    const boss = new module.PgBoss({
      connectionString: url,
      schema: BOSS_SCHEMA,
      max: PRODUCER_POOL,
      useListenNotify: true,
      supervise: false,
      schedule: false,
    });
    boss.on('error', (error) => console.error('pg-boss:', error.message));
    await boss.start();
    await boss.createQueue(queue, { notify: true });
    return {
      name: 'pg-boss',
      enqueue: (payload) => boss.send(queue, payload),
      enqueueBatch: (payloads) =>
        boss.insert(
          queue,
          payloads.map((data) => ({ data })),
        ),
      async work(concurrency, handler) {
        const options = {
          batchSize: HELD,
          burstWhenBatchFull: true,
          pollingIntervalSeconds: 0.5,
          // Its default, 30 s, is the wait after any fetch a notification did not prompt.
          notifyPollingIntervalSeconds: 0.5,
        };
        await boss.work(queue, options, (jobs) => {
          for (const job of jobs) handler(job.data);
          return Promise.resolve();
        });
        return { stop: () => boss.offWork(queue, { wait: true }) };
      },
      async close() {
        await boss.deleteQueue(queue);
        await boss.stop({ graceful: true, close: true, timeout: 30_000 });
      },
    };
  };
}

// --- graphile-worker -------------------------------------------------------

interface GraphileUtils {
  addJob(identifier: string, payload: Payload): Promise<unknown>;
  addJobs(specs: { identifier: string; payload: Payload }[]): Promise<unknown>;
  migrate(): Promise<void>;
  release(): Promise<void>;
  withPgClient<T>(
    callback: (client: { query(sql: string, values: unknown[]): Promise<unknown> }) => Promise<T>,
  ): Promise<T>;
}
interface GraphileRunner {
  stop(): Promise<void>;
}
type GraphileLogFunction = (level: string, message: string) => void;
export interface GraphileModule {
  makeWorkerUtils(options: object): Promise<GraphileUtils>;
  run(options: object): Promise<GraphileRunner>;
  Logger: new (factory: () => GraphileLogFunction) => object;
}

export const GRAPHILE_SCHEMA = 'graphile_worker';

/**
 * graphile-worker at the settings of its documentation's performance page: a local queue of 500 jobs
 * fetched at once, job completions batched (`completeJobBatchDelay: 0`, `failJobBatchDelay: 0`), and a
 * worker pool of concurrency + 2 connections, as that page recommends. Its jobs are keyed by task
 * identifier: each queue here is one, and a worker fetches only the identifiers in its task list.
 * graphile-worker deletes a job once it succeeds.
 */
export function graphileWorkerPeer(url: string, module: GraphileModule): PeerFactory {
  // Errors only: the runner logs every start and stop at info.
  const logger = new module.Logger(() => (level, message) => {
    if (level === 'error') console.error('graphile-worker:', message);
  });
  return async (queue) => {
    const utils = await module.makeWorkerUtils({ connectionString: url, maxPoolSize: PRODUCER_POOL, logger });
    await utils.migrate();
    return {
      name: 'graphile-worker',
      enqueue: (payload) => utils.addJob(queue, payload),
      enqueueBatch: (payloads) => utils.addJobs(payloads.map((payload) => ({ identifier: queue, payload }))),
      async work(concurrency, handler) {
        const runner = await module.run({
          connectionString: url,
          concurrency,
          noHandleSignals: true,
          logger,
          taskList: {
            [queue]: (payload: Payload) => {
              handler(payload);
              return Promise.resolve();
            },
          },
          preset: {
            worker: {
              maxPoolSize: concurrency + 2,
              localQueue: { size: HELD },
              completeJobBatchDelay: 0,
              failJobBatchDelay: 0,
            },
          },
        });
        return { stop: () => runner.stop() };
      },
      async close() {
        await utils.withPgClient((client) =>
          client.query(
            `DELETE FROM ${GRAPHILE_SCHEMA}._private_jobs j USING ${GRAPHILE_SCHEMA}._private_tasks t ` +
              'WHERE t.id = j.task_id AND t.identifier = $1',
            [queue],
          ),
        );
        await utils.release();
      },
    };
  };
}
