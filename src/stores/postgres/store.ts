/**
 * The PostgreSQL store: kvmq's tables in a schema of its own (schema.ts), reached through a pool of
 * connections (node-postgres, loaded only when a postgres:// URL is opened) and one pinned session for
 * LISTEN/NOTIFY wake-ups and the consumers' advisory locks (session.ts). Every state change is one
 * transaction at READ COMMITTED: claims lock the rows they take with `FOR UPDATE SKIP LOCKED`, so concurrent
 * claims pass each other; reads that combine several statements (counts, listings) run in one REPEATABLE
 * READ snapshot. Commits are PostgreSQL's, durable as the server is configured (fsync on by default).
 */
import type { ClientConfig, Pool, PoolClient } from 'pg';
import { importDriver } from '../contract/driver.js';
import { StoreUnavailableError } from '../../model/errors.js';
import { applyConfigPatch } from '../../model/config.js';
import {
  cancelMessage,
  promoteMessages,
  updateMessage,
  removeMessages,
  retryFailed,
  retryMessages,
} from './actions.js';
import { cancelsPayload, eventsPayload, wakeChannel } from './channel.js';
import { enqueueInCallerTransaction } from './caller-tx.js';
import { claimMessages } from './claim.js';
import { beginHandlerTransaction } from './handler-tx.js';
import { enqueueMessages } from './enqueue.js';
import { eventsHead, readEvents } from './events.js';
import { finishMessages } from './finish.js';
import { flowChildren, flowTree, writeFlow } from './flows.js';
import { clearQueues } from './clear.js';
import { runGc, type GcAccess } from './gc.js';
import { coversWork, finishAndClaim, type KnownQueue } from './finish-claim.js';
import { ConsumerLanes } from './lanes.js';
import { readProgress, readReport, writeReports } from './reports.js';
import { withProgress } from '../contract/listing-progress.js';
import { liveConsumers, messageDetails, messageStatus, stateCounts } from './inspect.js';
import { listPage } from './list.js';
import { ConfigCache, ensureQueueRow } from './queue-row.js';
import { releaseDeadHolders } from './release.js';
import { checkSchema, migrate } from './schema.js';
import { NO_LOCK, PollingSession, type StoreSession } from './polling-session.js';
import { lockKey, Session } from './session.js';
import { heldAttemptSql, quoteIdent } from './sql-text.js';
import { runTransaction } from './transaction.js';
import { translatePgError } from './translate-error.js';
import { writeContext, type WriteContext } from './tx.js';
import { parsePostgresUrl, type PostgresUrlOptions } from './url.js';
import type { MessageEdit } from '../../model/update.js';
import type {
  CanceledMessage,
  ClaimRequest,
  ClaimResult,
  Configured,
  ConsumerRegistration,
  EventPage,
  Finish,
  FinishResult,
  FlowMessage,
  HandlerTransaction,
  HeldAttempt,
  NewMessage,
  Report,
  Store,
  StoreCapabilities,
  StoredDetails,
  StoredPage,
  StoredSchedule,
} from '../contract/contract.js';
import type { ListQuery } from '../../model/list.js';
import type { FlowNode } from '../../model/flow.js';
import type {
  ActionResult,
  ConsumerInfo,
  EnqueueResult,
  GcResult,
  MessageStatus,
  QueueConfig,
  QueueStatus,
  SqlTransaction,
} from '../../model/types.js';

const MAX_PAYLOAD_BYTES = 1024 * 1024;
const CONNECT_TIMEOUT_MS = 10_000;
// A claim looks for dead consumers' messages at most this often per queue (pg_locks is not free).
const RELEASE_SWEEP_MS = 200;

export async function openPostgresStore(url: string): Promise<Store> {
  const options = parsePostgresUrl(url);
  const pg = (await importDriver('postgres', () => import('pg'))).default;
  // bigint (counts, times) and numeric (sums) read as numbers: every value kvmq keeps fits a double.
  type GetTypeParser = NonNullable<ClientConfig['types']>['getTypeParser'];
  const builtIn: (oid: number, format?: string) => unknown = pg.types.getTypeParser.bind(pg.types) as never;
  const types = {
    getTypeParser: ((oid: number, format?: string): unknown =>
      oid === 20 || oid === 1700 ? (value: string) => Number(value) : builtIn(oid, format)) as GetTypeParser,
  };
  const config: ClientConfig = {
    host: options.host,
    port: options.port,
    user: options.user,
    password: options.password ?? '',
    database: options.database,
    ssl: options.ssl === false ? false : options.ssl.ca === null ? true : { ca: options.ssl.ca },
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    application_name: 'kvmq',
    types,
  };
  const pool = new pg.Pool({ ...config, max: options.poolSize });
  // A connection the server ended (a restart) fails the query it runs, if any, and is then dropped by the pool:
  // the 'error' event a connection also emits, idle or checked out, is no one's to handle.
  pool.on('error', () => undefined);
  pool.on('connect', (client) => client.on('error', () => undefined));
  let standby: boolean;
  try {
    const client = await pool.connect();
    try {
      standby =
        (await client.query<{ standby: boolean }>('SELECT pg_is_in_recovery() AS standby')).rows[0]?.standby === true;
      await (standby ? checkSchema(client, options.schema) : migrate(client, options.schema));
    } finally {
      client.release();
    }
  } catch (error) {
    await pool.end().catch(() => undefined);
    throw translatePgError(error, options.where);
  }
  // Behind a pooler in transaction mode no connection is the client's own session: poll, and hold no locks.
  // A standby takes no LISTEN (nor a NOTIFY to hear): it polls too, and its writes are refused (StoreUrlError).
  const session =
    options.pooler === 'transaction' || standby
      ? new PollingSession()
      : new Session(options.schema, lockKey(`kvmq ${options.schema}`), () => new pg.Client(config));
  return new PostgresStore(pool, session, options);
}

class PostgresStore implements Store {
  readonly kind = 'postgres';
  readonly capabilities: StoreCapabilities;
  // The actions that are one write of their queue (actions.ts).
  readonly retry = this.action(retryMessages);
  readonly retryFailed = this.action(retryFailed);
  readonly remove = this.action(removeMessages);
  readonly promote = this.action(promoteMessages);
  private readonly schema: string;
  private readonly s: string;
  private readonly configs = new ConfigCache();
  private readonly swept = new Map<string, number>();
  /** Each queue's configuration and filter classes as the last write transaction read them. */
  private readonly known = new Map<string, KnownQueue>();
  private readonly lanes = new ConsumerLanes((queue, consumerId, finishes, claim) =>
    this.finishAndClaim(queue, consumerId, finishes, claim),
  );
  private readonly gcAccess: GcAccess;
  private closed = false;

  constructor(
    private readonly pool: Pool,
    private readonly session: StoreSession,
    private readonly options: PostgresUrlOptions,
  ) {
    const pinned = options.pooler !== 'transaction';
    this.capabilities = {
      maxPayloadBytes: MAX_PAYLOAD_BYTES,
      // LISTEN and the consumers' advisory locks need a session of their own, which a transaction pooler lacks.
      wakeups: pinned,
      instantRelease: pinned,
      deadLetterQueue: true,
      // A consumer's finishes and claims go in order, those waiting together as one (lanes.ts).
      claimWithFinishes: true,
      // With a backlog, the next claim runs while the last answer's handlers do. The worker sends one ahead only
      // after an answer as large as it asked for: at a trickle one came back dry, and the idle worker then waited
      // out its end-of-queue backoff.
      overlapClaims: true,
      flows: true,
    };
    this.schema = options.schema;
    this.s = quoteIdent(options.schema);
    this.gcAccess = {
      s: this.s,
      config: (queue) => this.config(queue),
      write: (queue, fn) => this.write(queue, fn),
      withClient: (fn) => this.withClient(fn),
    };
  }

  enqueue(queue: string, messages: readonly NewMessage[]): Promise<EnqueueResult[]> {
    return this.withClient((client) => enqueueMessages(client, this.schema, queue, messages));
  }

  enqueueIn(tx: SqlTransaction, queue: string, messages: readonly NewMessage[]): Promise<EnqueueResult[]> {
    if (this.closed) return Promise.reject(new StoreUnavailableError('the PostgreSQL store is closed'));
    return enqueueInCallerTransaction(tx, this.schema, queue, messages, this.options.where);
  }

  async beginHandlerTransaction(): Promise<HandlerTransaction> {
    if (this.closed) throw new StoreUnavailableError('the PostgreSQL store is closed');
    const transaction = await beginHandlerTransaction(this.pool, this.schema, this.configs, this.options.where);
    return {
      ...transaction,
      // The consumer's next claim waits for this commit, as for its other finishes.
      commit: (queue, consumerId, finish) => {
        const committed = transaction.commit(queue, consumerId, finish);
        this.lanes.committing(queue, consumerId, committed);
        return committed;
      },
    };
  }

  async flow(messages: readonly FlowMessage[]): Promise<void> {
    const root = messages[0];
    if (root !== undefined) await this.write(root.queue, (tx) => writeFlow(tx, messages));
  }

  flowTree(queue: string, id: string): Promise<FlowNode | null> {
    return this.withClient((client) => flowTree(client, this.s, queue, id));
  }

  flowChildren(queue: string, id: string): Promise<MessageStatus[]> {
    return this.withClient((client) => flowChildren(client, this.s, queue, id));
  }

  claim(queue: string, request: ClaimRequest): Promise<ClaimResult> {
    const lost = this.session.lostFor(lockKey(request.consumerId));
    if (lost > 0) {
      // Its session ended: what it held is being given up; claim again once the worker's fences have fired.
      return Promise.resolve({ messages: [], queueSize: 0, dryRuns: 0, wakeAt: Date.now() + lost });
    }
    return this.lanes.claim(queue, request.consumerId, request);
  }

  extend(queue: string, consumerId: string, held: readonly HeldAttempt[], lockMs: number): Promise<string[]> {
    return this.withClient(async (client) => {
      const { rows } = await client.query<{ id: string }>(
        `UPDATE ${this.s}.messages m SET lock_until = $3
         FROM unnest($4::text[], $5::integer[]) AS u(id, attempt)
         WHERE ${heldAttemptSql('m', '$1', '$2')}
         RETURNING m.id`,
        [queue, consumerId, Date.now() + lockMs, held.map((h) => h.id), held.map((h) => h.attempt)],
      );
      const kept = new Set(rows.map((r) => r.id));
      return held.filter((h) => !kept.has(h.id)).map((h) => h.id);
    });
  }

  finish(queue: string, consumerId: string, finishes: readonly Finish[]): Promise<FinishResult[]> {
    return this.lanes.finish(queue, consumerId, finishes);
  }

  report(queue: string, consumerId: string, reports: readonly Report[]): Promise<FinishResult[]> {
    return this.write(queue, (tx) => writeReports(tx, consumerId, reports));
  }

  queues(): Promise<string[]> {
    return this.withClient(async (client) => {
      const { rows } = await client.query<{ queue: string }>(
        `SELECT q.queue FROM ${this.s}.queues q LEFT JOIN ${this.s}.counts c ON c.queue = q.queue
         GROUP BY q.queue, q.config
         HAVING q.config IS NOT NULL OR coalesce(sum(c.size), 0) > 0 OR coalesce(sum(c.done), 0) > 0
           OR coalesce(sum(c.failed), 0) > 0
           OR EXISTS (SELECT 1 FROM ${this.s}.messages m WHERE m.queue = q.queue AND m.phase = 4)
         ORDER BY q.queue COLLATE "C"`,
      );
      return rows.map((r) => r.queue);
    });
  }

  status(queue: string, id: string): Promise<MessageStatus | null> {
    return this.withClient((client) => messageStatus(client, this.s, queue, id));
  }

  queueStatus(queue: string): Promise<QueueStatus> {
    return this.snapshot(async (client) => {
      const now = Date.now();
      const counts = await stateCounts(client, this.s, queue, now);
      const { rows } = await client.query<{ dry_runs: number; config: string | null }>(
        `SELECT dry_runs, config FROM ${this.s}.queues WHERE queue = $1`,
        [queue],
      );
      return {
        queue,
        counts,
        total: Object.values(counts).reduce((a, b) => a + b, 0),
        consumers: await liveConsumers(client, this.s, queue, now),
        dryRuns: rows[0]?.dry_runs ?? 0,
        paused: this.configs.of(queue, rows[0]?.config ?? null).paused,
      };
    });
  }

  list(queue: string, query: ListQuery): Promise<StoredPage> {
    return this.snapshot(async (client) => {
      const page = await listPage(client, this.s, queue, query);
      const ids = page.messages.map((m) => m.status.id);
      return withProgress(page, await readProgress(client, this.s, queue, ids));
    });
  }

  inspect(queue: string, id: string): Promise<StoredDetails | null> {
    return this.snapshot(async (client) => {
      const details = await messageDetails(client, this.s, queue, id);
      return details === null ? null : { ...details, report: await readReport(client, this.s, queue, id) };
    });
  }

  cancel(queue: string, id: string, error: string): Promise<ActionResult> {
    return this.write(queue, (tx) => cancelMessage(tx, id, error));
  }

  /** By the NOTIFY the cancel sends; behind a pooler in transaction mode, a poll that renews (polling-session.ts). */
  subscribeCancels(queue: string, listener: (canceled: CanceledMessage | null) => void): () => void {
    return this.session.subscribe(cancelsPayload(queue), (canceled) => listener(canceled ?? null));
  }

  update(queue: string, id: string, edit: MessageEdit): Promise<ActionResult> {
    return this.write(queue, (tx) => updateMessage(tx, id, edit));
  }

  async clear(queues: readonly string[]): Promise<void> {
    await this.transaction((client) => clearQueues(client, this.schema, queues, this.configs));
  }

  config(queue: string): Promise<QueueConfig> {
    return this.withClient((client) => this.configs.read(client, this.s, queue));
  }

  configure(queue: string, patch: Partial<QueueConfig>): Promise<Configured> {
    return this.transaction(async (client) => {
      // A queue exists once anything wrote to it (a message, a worker, a configuration).
      const inserted = await client.query(
        `INSERT INTO ${this.s}.queues (queue) VALUES ($1) ON CONFLICT DO NOTHING RETURNING 1`,
        [queue],
      );
      const { rows } = await client.query<{ config: string | null }>(
        `SELECT config FROM ${this.s}.queues WHERE queue = $1 FOR UPDATE`,
        [queue],
      );
      const before = this.configs.of(queue, rows[0]?.config ?? null);
      const config = applyConfigPatch(before, patch);
      await client.query(`UPDATE ${this.s}.queues SET config = $2 WHERE queue = $1`, [queue, JSON.stringify(config)]);
      // A resume wakes idle workers as an enqueue does.
      if (before.paused && !config.paused) await this.notify(client, queue);
      return { config, created: inserted.rowCount === 1 };
    });
  }

  gc(queue: string, force: boolean): Promise<GcResult> {
    return runGc(this.gcAccess, queue, force);
  }

  async registerConsumer(queue: string, consumer: ConsumerRegistration): Promise<void> {
    const key = this.capabilities.instantRelease ? lockKey(consumer.id) : NO_LOCK;
    // The lock first: a registered consumer whose lock is free reads as dead.
    await this.guard(() => this.session.hold(key));
    await this.withClient(async (client) => {
      const now = Date.now();
      await client.query(
        `WITH q AS (INSERT INTO ${this.s}.queues (queue) VALUES ($1) ON CONFLICT DO NOTHING)
         INSERT INTO ${this.s}.consumers (queue, id, host, pid, started_at, seen_at, expires_at, lock_key)
         VALUES ($1, $2, $3, $4, $5, $5, $6, $7)
         ON CONFLICT (queue, id) DO UPDATE SET seen_at = excluded.seen_at, expires_at = excluded.expires_at`,
        [queue, consumer.id, consumer.host, consumer.pid, now, now + consumer.ttlMs, key],
      );
    });
  }

  async unregisterConsumer(queue: string, consumerId: string): Promise<void> {
    await this.withClient((client) =>
      client.query(`DELETE FROM ${this.s}.consumers WHERE queue = $1 AND id = $2`, [queue, consumerId]),
    );
    await this.guard(() => this.session.release(lockKey(consumerId)));
  }

  consumers(queue: string): Promise<ConsumerInfo[]> {
    return this.withClient((client) => liveConsumers(client, this.s, queue, Date.now()));
  }

  readEvents(queue: string, after: string | null, limit: number): Promise<EventPage> {
    return this.withClient((client) => readEvents(client, this.s, queue, after, limit));
  }

  eventsHead(queue: string): Promise<string> {
    return this.withClient((client) => eventsHead(client, this.s, queue));
  }

  subscribeEvents(queue: string, listener: () => void): () => void {
    return this.session.subscribe(eventsPayload(queue), listener);
  }

  /**
   * On this client's clock, as every other time the store keeps. Callers read their clocks before their
   * statements reach the row, in any order: a turn taken a moment "later" than a caller's now is within its
   * window. Only one taken more than a window ahead (a clock that went back) is taken over.
   */
  takeTurn(queue: string, name: string, everyMs: number): Promise<boolean> {
    return this.withClient(async (client) => {
      const taken = await client.query(
        `INSERT INTO ${this.s}.turns AS t (queue, name, taken_at) VALUES ($1, $2, $3)
         ON CONFLICT (queue, name) DO UPDATE SET taken_at = excluded.taken_at
         WHERE t.taken_at + $4 <= excluded.taken_at OR t.taken_at > excluded.taken_at + $4`,
        [queue, name, Date.now(), everyMs],
      );
      return taken.rowCount === 1;
    });
  }

  putSchedule(queue: string, schedule: StoredSchedule): Promise<boolean> {
    return this.withClient(async (client) => {
      const { rows } = await client.query<{ created: boolean }>(
        `WITH q AS (INSERT INTO ${this.s}.queues (queue) VALUES ($1) ON CONFLICT DO NOTHING)
         INSERT INTO ${this.s}.schedules AS x (queue, name, body, next_at) VALUES ($1, $2, $3, $4)
         ON CONFLICT (queue, name) DO UPDATE SET body = excluded.body, next_at = excluded.next_at
         RETURNING (xmax = 0) AS created`,
        [queue, schedule.name, schedule.body, schedule.nextAt],
      );
      return rows[0]?.created === true;
    });
  }

  schedules(queue: string): Promise<StoredSchedule[]> {
    return this.withClient(async (client) => {
      const { rows } = await client.query<StoredSchedule>(
        `SELECT name, body, next_at AS "nextAt" FROM ${this.s}.schedules WHERE queue = $1 ORDER BY name COLLATE "C"`,
        [queue],
      );
      return rows;
    });
  }

  removeSchedule(queue: string, name: string): Promise<boolean> {
    return this.withClient(async (client) => {
      const removed = await client.query(`DELETE FROM ${this.s}.schedules WHERE queue = $1 AND name = $2`, [
        queue,
        name,
      ]);
      return removed.rowCount === 1;
    });
  }

  /** The compare-and-set and the enqueue in one transaction: both happen or neither. */
  fireSchedule(
    queue: string,
    expected: StoredSchedule,
    nextAt: number,
    messages: readonly NewMessage[],
  ): Promise<EnqueueResult[] | null> {
    return this.transaction(async (client) => {
      const advanced = await client.query(
        `UPDATE ${this.s}.schedules SET next_at = $5 WHERE queue = $1 AND name = $2 AND body = $3 AND next_at = $4`,
        [queue, expected.name, expected.body, expected.nextAt, nextAt],
      );
      if (advanced.rowCount !== 1) return null;
      return enqueueMessages(client, this.schema, queue, messages);
    });
  }

  subscribe(queue: string, listener: () => void): () => void {
    return this.session.subscribe(queue, listener);
  }

  /** Claims also end with the pinned session that holds the consumers' advisory locks (instant release). */
  claimsHeldUntil(): number {
    return this.session.heldUntil();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.session.close();
    await this.pool.end().catch(() => undefined);
  }

  /**
   * A lane's turn: one statement when it covers the work (finish-claim.ts), else one transaction of the general
   * statements, the finishes first.
   */
  private async finishAndClaim(
    queue: string,
    consumerId: string,
    finishes: readonly Finish[],
    claim: ClaimRequest | null,
  ): Promise<{ results: FinishResult[]; claimed: ClaimResult | null }> {
    const known = this.known.get(queue);
    const sweep = claim !== null && this.sweepDue(queue);
    if (known !== undefined && !sweep && coversWork(known, finishes, claim)) {
      const done = await this.withClient((client) =>
        finishAndClaim(client, this.schema, queue, consumerId, known, finishes, claim),
      );
      if (done !== null) return done;
    }
    return this.write(queue, async (tx) => {
      const results = finishes.length > 0 ? await finishMessages(tx, consumerId, finishes) : [];
      return { results, claimed: claim === null ? null : await this.claimIn(tx, claim) };
    });
  }

  private sweepDue(queue: string): boolean {
    return this.capabilities.instantRelease && Date.now() - (this.swept.get(queue) ?? 0) >= RELEASE_SWEEP_MS;
  }

  /** A claim in a write transaction, first freeing dead consumers' messages now and then (release.ts). */
  private async claimIn(tx: WriteContext, request: ClaimRequest): Promise<ClaimResult> {
    let released = 0;
    if (this.capabilities.instantRelease && tx.now - (this.swept.get(tx.queue) ?? 0) >= RELEASE_SWEEP_MS) {
      this.swept.set(tx.queue, tx.now);
      released = await releaseDeadHolders(tx, this.session.lockSpace);
    }
    return claimMessages(tx, request, released);
  }

  private notify(client: PoolClient, queue: string): Promise<unknown> {
    return client.query('SELECT pg_notify($1, $2)', [wakeChannel(this.schema), queue]);
  }

  /** A write transaction on a queue whose row exists; see tx.ts. */
  private write<T>(queue: string, fn: (tx: WriteContext) => Promise<T>): Promise<T> {
    return this.transaction(async (client) => {
      const row = await ensureQueueRow(client, this.s, queue);
      const { tx, finish } = writeContext(client, this.schema, queue, row, this.configs);
      this.known.set(queue, { json: row.config, config: tx.config, classes: row.classes });
      const result = await fn(tx);
      await finish();
      return result;
    });
  }

  /** A Store call that runs `fn` in one write of its queue, with the call's arguments after the queue. */
  private action<A extends unknown[], R>(
    fn: (tx: WriteContext, ...args: A) => Promise<R>,
  ): (queue: string, ...args: A) => Promise<R> {
    return (queue, ...args) => this.write(queue, (tx) => fn(tx, ...args));
  }

  /** Runs `fn` in a transaction, again when PostgreSQL rolled it back whole (transaction.ts). */
  private transaction<T>(fn: (client: PoolClient) => Promise<T>, begin = 'BEGIN'): Promise<T> {
    return this.withClient((client) => runTransaction(client, fn, begin));
  }

  /** Reads in one snapshot, so every statement sees the same state. */
  private snapshot<T>(fn: (client: PoolClient) => Promise<T>): Promise<T> {
    return this.transaction(fn, 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
  }

  private async withClient<T>(fn: (client: PoolClient) => Promise<T>): Promise<T> {
    if (this.closed) throw new StoreUnavailableError('the PostgreSQL store is closed');
    let client: PoolClient;
    try {
      client = await this.pool.connect();
    } catch (error) {
      throw translatePgError(error, this.options.where);
    }
    let broken: Error | undefined;
    try {
      return await fn(client);
    } catch (error) {
      const translated = translatePgError(error, this.options.where);
      if (translated instanceof StoreUnavailableError) broken = translated;
      throw translated;
    } finally {
      client.release(broken);
    }
  }

  private async guard<T>(fn: () => Promise<T>): Promise<T> {
    if (this.closed) throw new StoreUnavailableError('the PostgreSQL store is closed');
    try {
      return await fn();
    } catch (error) {
      throw translatePgError(error, this.options.where);
    }
  }
}
