/**
 * The embedded store: one SQLite file in WAL mode, shared safely by any
 * number of processes on the machine. Every state change is one IMMEDIATE
 * transaction, so claims stay exclusive across processes.
 *
 * Durability: with the default `synchronous=normal`, a committed write is in
 * the WAL before the call returns, so it survives the process being killed;
 * `?synchronous=full` also fsyncs each commit, to survive power loss.
 */
import { existsSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { createRequire } from 'node:module';
import type BetterSqlite3 from 'better-sqlite3';
import { StoreLayoutError, StoreUnavailableError, StoreUrlError } from '../../model/errors.js';
import { applyConfigPatch } from '../../model/config.js';
import { sleep } from '../../model/time.js';
import { parseUrlOptions } from '../contract/url-options.js';
import {
  cancelMessage,
  promoteMessages,
  updateMessage,
  removeMessages,
  retryFailed,
  retryMessages,
} from './actions.js';
import { claimMessages } from './claim.js';
import { enqueueMessages } from './enqueue.js';
import { runGc } from './gc.js';
import { finishMessages, type BulkFinishes } from './finish.js';
import { clearedChildrenEnd, flowChildren, flowTree, writeFlow } from './flows.js';
import { finishResults, finishSuccesses, insertMessages, removeSuccesses, type MessageInserts } from './chunked.js';
import { liveConsumers, messageDetails, messageStatus, stateCounts } from './inspect.js';
import { Lister } from './list.js';
import { pendingRanges } from './pending.js';
import type { WriteContext } from './failures.js';
import { ScheduleTable } from './schedules.js';
import { ReportTable } from './reports.js';
import { withProgress } from '../contract/listing-progress.js';
import { migrate } from './schema.js';
import { ParsedConfigs } from './parsed-configs.js';
import { prepareStatements, type QueueRow, type Statements } from './statements.js';
import { eventsChannel, Wakeups } from './wakeups.js';
import { EventLog, pendingEvent, type PendingEvent } from './events.js';
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
  HeldAttempt,
  NewMessage,
  Report,
  Store,
  StoreCapabilities,
  StoredDetails,
  StoredPage,
  StoredSchedule,
} from '../contract/contract.js';
import type { FlowNode } from '../../model/flow.js';
import type { ListQuery } from '../../model/list.js';
import type {
  ActionResult,
  ConsumerInfo,
  EnqueueResult,
  GcResult,
  MessageStatus,
  QueueConfig,
  QueueStatus,
} from '../../model/types.js';

const MAX_PAYLOAD_BYTES = 1024 * 1024;
const BUSY_TIMEOUT_MS = 10_000;

export interface SqliteOptions {
  readonly path: string;
  readonly synchronous: 'normal' | 'full';
  /** How long a call waits for another process's write lock before failing as unavailable. */
  readonly busyTimeoutMs: number;
}

export function parseSqliteUrl(url: string): SqliteOptions {
  const body = url.slice('sqlite:'.length);
  const q = body.indexOf('?');
  let path = q < 0 ? body : body.slice(0, q);
  // `sqlite:///abs/path` and `sqlite://./rel` read as the path after the slashes' authority part.
  if (path.startsWith('//')) path = path.slice(2);
  const options = parseUrlOptions(url, q < 0 ? '' : body.slice(q + 1), ['synchronous', 'busyTimeoutMs']);
  const synchronous = (options.get('synchronous') ?? 'normal').toLowerCase();
  const busyTimeoutMs = Number(options.get('busyTimeoutMs') ?? BUSY_TIMEOUT_MS);
  if (path === '' || path === ':memory:') {
    throw new StoreUrlError(`store URL ${JSON.stringify(url)} names no file; use e.g. sqlite:./kvmq.db`);
  }
  if (synchronous !== 'normal' && synchronous !== 'full') {
    throw new StoreUrlError(`store URL ${JSON.stringify(url)}: synchronous must be 'normal' or 'full'`);
  }
  if (!Number.isInteger(busyTimeoutMs) || busyTimeoutMs < 0) {
    throw new StoreUrlError(`store URL ${JSON.stringify(url)}: busyTimeoutMs must be a whole number of milliseconds`);
  }
  return { path: resolve(path), synchronous, busyTimeoutMs };
}

export async function openSqliteStore(url: string): Promise<Store> {
  const options = parseSqliteUrl(url);
  const dir = dirname(options.path);
  if (!existsSync(dir) || !statSync(dir).isDirectory()) {
    throw new StoreUrlError(`store URL ${JSON.stringify(url)}: directory ${dir} does not exist; create it first`);
  }
  // better-sqlite3 is CommonJS; load it only when a SQLite store is opened.
  const Database = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3;
  let db: BetterSqlite3.Database;
  try {
    db = new Database(options.path, { timeout: options.busyTimeoutMs });
    await enableWal(db, options.busyTimeoutMs);
    db.pragma(`synchronous = ${options.synchronous}`);
    db.pragma('cache_size = -32768'); // 32 MiB of page cache, whatever the backlog
    migrate(db, options.path);
  } catch (error) {
    if (error instanceof StoreLayoutError) throw error;
    const message = error instanceof Error ? error.message : String(error);
    if (/not a database|malformed/i.test(message)) {
      throw new StoreLayoutError(`${options.path} is not a kvmq SQLite file (${message})`);
    }
    throw new StoreUnavailableError(`cannot open ${options.path}: ${message}`, error);
  }
  await Promise.resolve();
  return new SqliteStore(db, options.path);
}

/**
 * Puts the file in WAL mode. While another process is opening the same file,
 * SQLite can refuse the switch with SQLITE_BUSY at once, without waiting as
 * the busy timeout asks for other statements; so it is retried until then.
 */
async function enableWal(db: BetterSqlite3.Database, busyTimeoutMs: number): Promise<void> {
  const until = Date.now() + busyTimeoutMs;
  for (;;) {
    try {
      db.pragma('journal_mode = WAL');
      return;
    } catch (error) {
      if ((error as { code?: unknown }).code !== 'SQLITE_BUSY' || Date.now() >= until) throw error;
      await sleep(10);
    }
  }
}

class SqliteStore implements Store {
  readonly kind = 'sqlite';
  readonly capabilities: StoreCapabilities = {
    maxPayloadBytes: MAX_PAYLOAD_BYTES,
    wakeups: true,
    instantRelease: false,
    deadLetterQueue: true,
    claimWithFinishes: true,
    overlapClaims: false,
    flows: true,
  };
  // The actions that are one write of their queue (actions.ts).
  readonly retry = this.action(retryMessages);
  readonly retryFailed = this.action(retryFailed);
  readonly remove = this.action(removeMessages);
  readonly promote = this.action(promoteMessages);
  private readonly sql: Statements;
  private readonly insertMessages: MessageInserts;
  private readonly bulkFinishes: BulkFinishes;
  private readonly wakeups: Wakeups;
  /** Cancels of held messages, told to their workers (its own file: claims and finishes never touch it). */
  private readonly cancels: Wakeups<CanceledMessage>;
  private readonly ensured = new Set<string>();
  private readonly knownClasses = new Map<string, Set<string>>();
  private readonly configs = new ParsedConfigs();
  private readonly lister: Lister;
  private readonly events: EventLog;
  private readonly scheduleTable: ScheduleTable;
  private readonly reports: ReportTable;
  // Made once: db.transaction() builds four wrapper functions per call, about 4 µs a transaction.
  private readonly inTransaction: BetterSqlite3.Transaction<(fn: () => unknown) => unknown>;
  private closed = false;

  constructor(
    private readonly db: BetterSqlite3.Database,
    path: string,
  ) {
    this.sql = prepareStatements(db);
    this.insertMessages = insertMessages(db);
    this.bulkFinishes = { plain: finishSuccesses(db), removePlain: removeSuccesses(db), withResult: finishResults(db) };
    this.lister = new Lister(db);
    this.events = new EventLog(db);
    this.scheduleTable = new ScheduleTable(db);
    this.reports = new ReportTable(db);
    this.inTransaction = db.transaction((fn: () => unknown): unknown => fn());
    // Another process's cancel is a hint to renew; this process's own were told with their ids already.
    this.cancels = new Wakeups<CanceledMessage>(path, () => !this.closed, '-cancel');
    let dataVersion = -1;
    this.wakeups = new Wakeups(path, () => {
      if (this.closed) return false;
      const version = db.pragma('data_version', { simple: true }) as number;
      const changed = version !== dataVersion;
      dataVersion = version;
      return changed;
    });
  }

  enqueue(queue: string, messages: readonly NewMessage[]): Promise<EnqueueResult[]> {
    return this.write(queue, (tx) => this.addMessages(tx, messages));
  }

  /** Enqueue's work inside a write transaction: what `enqueue` and `fireSchedule` both do. */
  private addMessages(tx: WriteContext, messages: readonly NewMessage[]): EnqueueResult[] {
    const { queue } = tx;
    const { results, readyNow } = enqueueMessages(tx, this.insertMessages, this.classesOf(queue), messages);
    if (readyNow) tx.wake(queue);
    return results;
  }

  /** The filter classes this process knows the queue has (each recorded once in kvmq_classes). */
  private classesOf(queue: string): Set<string> {
    let classes = this.knownClasses.get(queue);
    if (classes === undefined) {
      classes = new Set();
      this.knownClasses.set(queue, classes);
    }
    return classes;
  }

  async flow(messages: readonly FlowMessage[]): Promise<void> {
    const root = messages[0];
    if (root === undefined) return;
    const added: [string, string][] = [];
    const addClass = (queue: string, filterClass: string): void => {
      const classes = this.classesOf(queue);
      if (classes.has(filterClass)) return;
      this.sql.addClass.run(queue, filterClass);
      added.push([queue, filterClass]);
    };
    await this.write(root.queue, (tx) => writeFlow(tx, messages, addClass));
    // Known once committed: a flow refused rolled its classes back with it.
    for (const [queue, filterClass] of added) this.classesOf(queue).add(filterClass);
  }

  flowTree(queue: string, id: string): Promise<FlowNode | null> {
    return this.snapshot(() => flowTree(this.sql, queue, id, Date.now()));
  }

  flowChildren(queue: string, id: string): Promise<MessageStatus[]> {
    return this.snapshot(() => flowChildren(this.sql, queue, id, Date.now()));
  }

  claim(queue: string, request: ClaimRequest): Promise<ClaimResult> {
    return this.write(queue, (tx) => {
      // The paused flag and maxDeliveries are read in the claim's own transaction.
      const row = this.sql.queueRow.get(queue) as QueueRow;
      return claimMessages({ ...tx, config: () => this.configOf(queue, row) }, row, request);
    });
  }

  extend(queue: string, consumerId: string, held: readonly HeldAttempt[], lockMs: number): Promise<string[]> {
    return this.write(queue, ({ now }) =>
      held
        .filter(({ id, attempt }) => {
          const params = { queue, id, attempt, consumer: consumerId, lockUntil: now + lockMs };
          return this.sql.extend.run(params).changes === 0;
        })
        .map(({ id }) => id),
    );
  }

  finish(queue: string, consumerId: string, finishes: readonly Finish[]): Promise<FinishResult[]> {
    return this.write(queue, (tx) => finishMessages(tx, this.bulkFinishes, consumerId, finishes));
  }

  report(queue: string, consumerId: string, reports: readonly Report[]): Promise<FinishResult[]> {
    return this.write(queue, (tx) => this.reports.write(tx, consumerId, reports));
  }

  status(queue: string, id: string): Promise<MessageStatus | null> {
    return this.read(() => messageStatus(this.sql, queue, id, Date.now()));
  }

  queueStatus(queue: string): Promise<QueueStatus> {
    return this.snapshot(() => {
      const now = Date.now();
      const row = this.sql.queueRow.get(queue) as QueueRow | undefined;
      const counts = stateCounts(this.sql, queue, row, now);
      return {
        queue,
        counts,
        total: Object.values(counts).reduce((a, b) => a + b, 0),
        consumers: liveConsumers(this.sql, queue, now),
        dryRuns: row?.dry_runs ?? 0,
        paused: this.configOf(queue, row).paused,
      };
    });
  }

  list(queue: string, query: ListQuery): Promise<StoredPage> {
    return this.snapshot(() => {
      const page = this.lister.page(queue, query, pendingRanges(this.sql, queue), Date.now());
      return withProgress(
        page,
        this.reports.progress(
          queue,
          page.messages.map((m) => m.status.id),
        ),
      );
    });
  }

  inspect(queue: string, id: string): Promise<StoredDetails | null> {
    return this.snapshot(() => {
      const details = messageDetails(this.sql, queue, id, Date.now());
      return details === null ? null : { ...details, report: this.reports.read(queue, id) };
    });
  }

  async cancel(queue: string, id: string, error: string): Promise<ActionResult> {
    const { result, held } = await this.write(queue, (tx) => cancelMessage(tx, id, error));
    if (held !== null) this.cancels.notifyWith(queue, held);
    return result;
  }

  subscribeCancels(queue: string, listener: (canceled: CanceledMessage | null) => void): () => void {
    return this.cancels.subscribe(queue, listener);
  }

  update(queue: string, id: string, edit: MessageEdit): Promise<ActionResult> {
    return this.write(queue, (tx) => updateMessage(tx, id, edit, this.classesOf(queue)));
  }

  async clear(queues: readonly string[]): Promise<void> {
    await this.transaction(() => {
      // Flows' children there end for their parents first, as removals (flows.ts); their events go below.
      const first = queues.find((q) => this.sql.owingChildren.get(q) !== undefined);
      if (first !== undefined) this.writeIn(first, (tx) => queues.forEach((q) => clearedChildrenEnd(tx, q)));
      for (const queue of queues) {
        this.sql.clearMessages.run(queue);
        this.sql.clearClasses.run(queue);
        this.sql.clearQueue.run(queue);
        this.events.empty(queue);
        this.knownClasses.delete(queue);
      }
    });
  }

  config(queue: string): Promise<QueueConfig> {
    return this.read(() => this.readConfig(queue));
  }

  configure(queue: string, patch: Partial<QueueConfig>): Promise<Configured> {
    return this.transaction(() => {
      // A queue exists once anything wrote to it (a message, a worker, a configuration).
      const row = this.sql.queueRow.get(queue) as QueueRow | undefined;
      if (row === undefined) this.sql.ensureQueue.run(queue);
      const before = this.configOf(queue, row);
      const config = applyConfigPatch(before, patch);
      this.sql.setConfig.run(JSON.stringify(config), queue);
      // A resume wakes idle workers as an enqueue does.
      if (before.paused && !config.paused) this.afterCommit(queue);
      return { config, created: row === undefined };
    });
  }

  async gc(queue: string, force: boolean): Promise<GcResult> {
    const store = {
      sql: this.sql,
      events: this.events,
      write: <T>(fn: (tx: WriteContext) => T) => this.write(queue, fn),
      transaction: <T>(fn: () => T) => this.transaction(fn),
    };
    return runGc(store, queue, await this.config(queue), force);
  }

  async registerConsumer(queue: string, consumer: ConsumerRegistration): Promise<void> {
    await this.write(queue, ({ now }) => {
      this.sql.upsertConsumer.run({
        queue,
        id: consumer.id,
        host: consumer.host,
        pid: consumer.pid,
        now,
        expiresAt: now + consumer.ttlMs,
      });
    });
  }

  async unregisterConsumer(queue: string, consumerId: string): Promise<void> {
    await this.transaction(() => this.sql.deleteConsumer.run(queue, consumerId));
  }

  consumers(queue: string): Promise<ConsumerInfo[]> {
    return this.read(() => liveConsumers(this.sql, queue, Date.now()));
  }

  queues(): Promise<string[]> {
    return this.read(() => this.sql.queues.all() as string[]);
  }

  readEvents(queue: string, after: string | null, limit: number): Promise<EventPage> {
    return this.snapshot(() => this.events.page(queue, after, limit));
  }

  eventsHead(queue: string): Promise<string> {
    return this.snapshot(() => this.events.head(queue));
  }

  subscribeEvents(queue: string, listener: () => void): () => void {
    return this.wakeups.subscribe(eventsChannel(queue), listener);
  }

  putSchedule(queue: string, schedule: StoredSchedule): Promise<boolean> {
    return this.write(queue, () => this.scheduleTable.put(queue, schedule));
  }

  schedules(queue: string): Promise<StoredSchedule[]> {
    return this.read(() => this.scheduleTable.list(queue));
  }

  removeSchedule(queue: string, name: string): Promise<boolean> {
    return this.transaction(() => this.scheduleTable.remove(queue, name));
  }

  /** The compare-and-set and the enqueue in one IMMEDIATE transaction: both happen or neither. */
  fireSchedule(
    queue: string,
    expected: StoredSchedule,
    nextAt: number,
    messages: readonly NewMessage[],
  ): Promise<EnqueueResult[] | null> {
    return this.write(queue, (tx) =>
      this.scheduleTable.advance(queue, expected, nextAt) ? this.addMessages(tx, messages) : null,
    );
  }

  /** On this machine's clock (every process sharing the file shares it). */
  takeTurn(queue: string, name: string, everyMs: number): Promise<boolean> {
    return this.transaction(() => this.sql.takeTurn.run({ queue, name, everyMs, now: Date.now() }).changes === 1);
  }

  subscribe(queue: string, listener: () => void): () => void {
    return this.wakeups.subscribe(queue, listener);
  }

  close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      this.wakeups.close();
      this.cancels.close();
      this.db.close();
    }
    return Promise.resolve();
  }

  private readConfig(queue: string): QueueConfig {
    return this.configOf(queue, this.sql.queueRow.get(queue) as QueueRow | undefined);
  }

  /** The configuration stored in the queue's row (parsed-configs.ts). */
  private configOf(queue: string, row: QueueRow | undefined): QueueConfig {
    return this.configs.of(queue, row?.config ?? null);
  }

  /**
   * A write transaction on a queue whose row exists; `now` is read inside it. The events it records are
   * inserted at its end, and every wake-up it asks for goes out once, after the commit. `writeIn`: the same in
   * the caller's transaction.
   */
  private write<T>(queue: string, fn: (tx: WriteContext) => T): Promise<T> {
    return this.transaction(() => this.writeIn(queue, fn));
  }

  /** A Store call that runs `fn` in one write of its queue, with the call's arguments after the queue. */
  private action<A extends unknown[], R>(
    fn: (tx: WriteContext, ...args: A) => R,
  ): (queue: string, ...args: A) => Promise<R> {
    return (queue, ...args) => this.write(queue, (tx) => fn(tx, ...args));
  }

  private writeIn<T>(queue: string, fn: (tx: WriteContext) => T): T {
    if (!this.ensured.has(queue)) {
      this.sql.ensureQueue.run(queue);
      this.ensured.add(queue);
    }
    let config: QueueConfig | undefined;
    const configOf = (q: string): QueueConfig =>
      q === queue ? (config ??= this.readConfig(queue)) : this.readConfig(q);
    const now = Date.now();
    const wakes = new Set<string>();
    const events: PendingEvent[] = [];
    const counts = { queue, size: 0, done: 0 };
    const result = fn({
      sql: this.sql,
      queue,
      now,
      config: () => configOf(queue),
      configOf,
      wake: (woken) => wakes.add(woken),
      event: (type, id, attempt, error = null, of = queue) => {
        if (configOf(of).events) events.push(pendingEvent(of, type, id, attempt, error));
      },
      count: (size, done) => {
        counts.size += size;
        counts.done += done;
      },
    });
    if (wakes.size > 0) this.afterCommit(...wakes);
    const counted = counts.size !== 0 || counts.done !== 0 ? counts : null;
    if (events.length > 0) {
      const channels = [...this.events.write(events, now, configOf, counted)].map(eventsChannel);
      queueMicrotask(() => this.wakeups.notifySoon(...channels));
    } else if (counted !== null) {
      this.sql.addCounts.run({ ...counted, failed: 0 });
    }
    return result;
  }

  /** Reads in one transaction, so every statement sees the same snapshot. */
  private snapshot<T>(fn: () => T): Promise<T> {
    return this.guard(() => this.inTransaction.deferred(fn) as T);
  }

  /** Runs `fn` in an IMMEDIATE transaction; store failures become typed errors. */
  private transaction<T>(fn: () => T): Promise<T> {
    return this.guard(() => this.inTransaction.immediate(fn) as T);
  }

  private read<T>(fn: () => T): Promise<T> {
    return this.guard(fn);
  }

  private guard<T>(fn: () => T): Promise<T> {
    if (this.closed) return Promise.reject(new StoreUnavailableError('the SQLite store is closed'));
    try {
      return Promise.resolve(fn());
    } catch (error) {
      return Promise.reject(translate(error));
    }
  }

  /** Wakes subscribers once the transaction has committed. */
  private afterCommit(...channels: string[]): void {
    queueMicrotask(() => this.wakeups.notify(...channels));
  }
}

function translate(error: unknown): Error {
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && /^SQLITE_(BUSY|LOCKED|IOERR|FULL|CANTOPEN)/.test(code)) {
    return new StoreUnavailableError(`SQLite: ${(error as Error).message}`, error);
  }
  return error instanceof Error ? error : new Error(String(error));
}
