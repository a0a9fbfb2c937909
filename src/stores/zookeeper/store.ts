/**
 * The ZooKeeper store: zkmq's tree (see layout.ts and docs/zookeeper.md) on a
 * real ensemble, every state change one multi. Claims are ephemeral nodes, so
 * a dead consumer's messages are free as soon as ZooKeeper ends its session.
 */
import { KvmqError, StoreAuthError, StoreUnavailableError, ZookeeperReplyError } from '../../model/errors.js';
import { ZkError, ZkSession } from './client.js';
import { claimMessages } from './claim.js';
import { readConfig, writeConfig } from './conf.js';
import { StoreContext } from './context.js';
import { enqueueMessages, MULTI_BYTES } from './enqueue.js';
import { extendLocks, finishInParts } from './finish.js';
import { progressOf, writeReports } from './reports.js';
import { withProgress } from '../contract/listing-progress.js';
import { clearQueue, runGc } from './gc.js';
import {
  inspectMessage,
  liveConsumers,
  messageStatus,
  registerConsumer,
  stateCounts,
  unregisterConsumer,
} from './inspect.js';
import { listMessages } from './list.js';
import { promoteMessages, removeMessages, retryFailedMessages, retryMessages, updateMessage } from './actions.js';
import type { MessageEdit } from '../../model/update.js';
import { checkRoot, listQueues } from './root.js';
import { EventWatches } from './event-watches.js';
import { CancelWatches } from './cancel-watches.js';
import { cancelMessage } from './cancel.js';
import { writeFlow } from './flow-write.js';
import { flowChildren, flowTree } from './flow-read.js';
import type { FlowNode } from '../../model/flow.js';
import { fireSchedule, listSchedules, putSchedule, removeSchedule } from './schedules.js';
import { takeTurn } from './turns.js';
import { parseZookeeperUrl } from './url.js';
import { Wakeups } from './wakeups.js';
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

/** The largest payload: a multi must stay below jute.maxbuffer (1 MiB) with the task's other nodes. */
export const MAX_PAYLOAD_BYTES = MULTI_BYTES - 64 * 1024;

export async function openZookeeperStore(url: string): Promise<Store> {
  const parsed = parseZookeeperUrl(url);
  const zk = await ZkSession.open({
    hosts: parsed.hosts,
    chroot: parsed.chroot,
    auth: parsed.auth,
    sessionTimeoutMs: parsed.sessionTimeoutMs,
    requestTimeoutMs: Math.max(10_000, 2 * parsed.sessionTimeoutMs),
  });
  try {
    await checkRoot(zk, parsed);
  } catch (error) {
    zk.close();
    throw error instanceof ZkError ? translate(error) : error;
  }
  return new ZookeeperStore(zk);
}

class ZookeeperStore implements Store {
  readonly kind = 'zookeeper';
  readonly capabilities: StoreCapabilities = {
    maxPayloadBytes: MAX_PAYLOAD_BYTES,
    wakeups: true,
    instantRelease: true,
    deadLetterQueue: true,
    claimWithFinishes: false,
    overlapClaims: false,
    flows: true,
  };
  private readonly ctx: StoreContext;
  private closed = false;

  private readonly events: EventWatches;
  private readonly cancels: CancelWatches;

  constructor(private readonly zk: ZkSession) {
    this.ctx = new StoreContext(zk, new Wakeups(zk));
    this.events = new EventWatches(zk, (queue) => this.ctx.queue(queue).paths.events);
    this.cancels = new CancelWatches(
      zk,
      (queue) => this.ctx.queue(queue).paths,
      (queue, consumer, canceled) => {
        this.ctx.dropHeld(queue, consumer, canceled.id, canceled.attempt);
      },
    );
  }

  enqueue(queue: string, messages: readonly NewMessage[]): Promise<EnqueueResult[]> {
    if (messages.length === 0) return Promise.resolve([]);
    return this.guard(() => enqueueMessages(this.ctx, this.ctx.queue(queue), messages));
  }

  flow(messages: readonly FlowMessage[]): Promise<void> {
    return this.guard(() => writeFlow(this.ctx, messages));
  }

  flowTree(queue: string, id: string): Promise<FlowNode | null> {
    return this.guard(() => flowTree(this.ctx, queue, id));
  }

  flowChildren(queue: string, id: string): Promise<MessageStatus[]> {
    return this.guard(() => flowChildren(this.ctx, queue, id));
  }

  claim(queue: string, request: ClaimRequest): Promise<ClaimResult> {
    return this.guard(() => claimMessages(this.ctx, this.ctx.queue(queue), request));
  }

  extend(queue: string, consumerId: string, held: readonly HeldAttempt[], lockMs: number): Promise<string[]> {
    return this.guard(() => extendLocks(this.ctx, this.ctx.queue(queue), consumerId, held, lockMs));
  }

  finish(queue: string, consumerId: string, finishes: readonly Finish[]): Promise<FinishResult[]> {
    return this.guard(() => finishInParts(this.ctx, this.ctx.queue(queue), consumerId, finishes));
  }

  report(queue: string, consumerId: string, reports: readonly Report[]): Promise<FinishResult[]> {
    return this.guard(() => writeReports(this.ctx, this.ctx.queue(queue), consumerId, reports));
  }

  status(queue: string, id: string): Promise<MessageStatus | null> {
    return this.guard(() => messageStatus(this.ctx, this.ctx.queue(queue), id));
  }

  queueStatus(queue: string): Promise<QueueStatus> {
    return this.guard(async () => {
      const q = this.ctx.queue(queue);
      const [consumers, dryRuns, config] = await Promise.all([
        liveConsumers(this.ctx, q),
        this.dryRuns(queue),
        readConfig(this.zk, q),
      ]);
      const counts = await stateCounts(this.ctx, q, consumers);
      const total = Object.values(counts).reduce((a, b) => a + b, 0);
      return { queue, counts, total, consumers, dryRuns, paused: config.paused };
    });
  }

  list(queue: string, query: ListQuery): Promise<StoredPage> {
    return this.guard(async () => {
      const q = this.ctx.queue(queue);
      const page = await listMessages(this.ctx, q, query);
      return withProgress(page, await progressOf(this.ctx.zk, q, page));
    });
  }

  inspect(queue: string, id: string): Promise<StoredDetails | null> {
    return this.guard(() => inspectMessage(this.ctx, this.ctx.queue(queue), id));
  }

  retry(queue: string, ids: readonly string[]): Promise<ActionResult[]> {
    return this.guard(() => retryMessages(this.ctx, this.ctx.queue(queue), ids));
  }

  retryFailed(queue: string, max: number): Promise<number> {
    return this.guard(() => retryFailedMessages(this.ctx, this.ctx.queue(queue), max));
  }

  remove(queue: string, ids: readonly string[]): Promise<ActionResult[]> {
    return this.guard(() => removeMessages(this.ctx, this.ctx.queue(queue), ids));
  }

  cancel(queue: string, id: string, error: string): Promise<ActionResult> {
    return this.guard(() => cancelMessage(this.ctx, this.ctx.queue(queue), id, error));
  }

  /** Holders hear of a cancel through the note it leaves under their consumer node (cancel-watches.ts). */
  subscribeCancels(queue: string, listener: (canceled: CanceledMessage | null) => void): () => void {
    return this.cancels.subscribe(queue, listener);
  }

  promote(queue: string, ids: readonly string[]): Promise<ActionResult[]> {
    return this.guard(() => promoteMessages(this.ctx, this.ctx.queue(queue), ids));
  }

  async update(queue: string, id: string, edit: MessageEdit): Promise<ActionResult> {
    const [result] = await this.guard(() => updateMessage(this.ctx, this.ctx.queue(queue), id, edit));
    return result ?? { ok: false, id, state: null };
  }

  clear(queues: readonly string[]): Promise<void> {
    return this.guard(async () => {
      for (const queue of queues) await clearQueue(this.ctx, this.ctx.queue(queue));
    });
  }

  config(queue: string): Promise<QueueConfig> {
    return this.guard(() => readConfig(this.zk, this.ctx.queue(queue)));
  }

  configure(queue: string, patch: Partial<QueueConfig>): Promise<Configured> {
    return this.guard(async () => {
      const q = this.ctx.queue(queue);
      const configured = await writeConfig(this.zk, q, patch);
      // A resume: idle workers of this process look again at once.
      if (!configured.config.paused) this.ctx.wakeups.notify(queue);
      return configured;
    });
  }

  gc(queue: string, force: boolean): Promise<GcResult> {
    return this.guard(() => runGc(this.ctx, this.ctx.queue(queue), force));
  }

  registerConsumer(queue: string, consumer: ConsumerRegistration): Promise<void> {
    return this.guard(async () => {
      await registerConsumer(this.ctx, this.ctx.queue(queue), consumer);
      this.cancels.watch(queue, consumer.id);
    });
  }

  unregisterConsumer(queue: string, consumerId: string): Promise<void> {
    this.cancels.unwatch(queue, consumerId);
    return this.guard(() => unregisterConsumer(this.ctx, this.ctx.queue(queue), consumerId));
  }

  consumers(queue: string): Promise<ConsumerInfo[]> {
    return this.guard(() => liveConsumers(this.ctx, this.ctx.queue(queue)));
  }

  queues(): Promise<string[]> {
    return this.guard(() => listQueues(this.zk));
  }

  readEvents(queue: string, after: string | null, limit: number): Promise<EventPage> {
    return this.guard(() => this.ctx.queue(queue).events.read(after, limit));
  }

  eventsHead(queue: string): Promise<string> {
    return this.guard(() => this.ctx.queue(queue).events.head());
  }

  subscribeEvents(queue: string, listener: () => void): () => void {
    return this.events.subscribe(queue, listener);
  }

  putSchedule(queue: string, schedule: StoredSchedule): Promise<boolean> {
    return this.guard(() => putSchedule(this.zk, this.ctx.queue(queue), schedule));
  }

  schedules(queue: string): Promise<StoredSchedule[]> {
    return this.guard(() => listSchedules(this.zk, this.ctx.queue(queue)));
  }

  removeSchedule(queue: string, name: string): Promise<boolean> {
    return this.guard(() => removeSchedule(this.zk, this.ctx.queue(queue), name));
  }

  fireSchedule(
    queue: string,
    expected: StoredSchedule,
    nextAt: number,
    messages: readonly NewMessage[],
  ): Promise<EnqueueResult[] | null> {
    return this.guard(() => fireSchedule(this.ctx, this.ctx.queue(queue), expected, nextAt, messages));
  }

  takeTurn(queue: string, name: string, everyMs: number): Promise<boolean> {
    return this.guard(() => takeTurn(this.zk, this.ctx.queue(queue), name, everyMs));
  }

  /** Claims are ephemeral nodes of this process's session: they last no longer than the server keeps it. */
  claimsHeldUntil(): number {
    return this.zk.liveUntil();
  }

  subscribe(queue: string, listener: () => void): () => void {
    return this.ctx.wakeups.subscribe(queue, listener);
  }

  close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      this.events.close();
      this.cancels.close();
      this.zk.close();
    }
    return Promise.resolve();
  }

  private async dryRuns(queue: string): Promise<number> {
    const q = this.ctx.queue(queue);
    if (!(await q.exists())) return 0;
    const { data } = await this.zk.get(q.paths.queue);
    try {
      return (JSON.parse(data.toString('utf8')) as { dryRuns?: number }).dryRuns ?? 0;
    } catch {
      return 0;
    }
  }

  private async guard<T>(fn: () => Promise<T>): Promise<T> {
    if (this.closed) throw new StoreUnavailableError('the ZooKeeper store is closed');
    try {
      return await fn();
    } catch (error) {
      throw error instanceof ZkError ? translate(error) : error;
    }
  }
}

/** A ZooKeeper reply no operation expected: say what it was and where. */
function translate(error: ZkError): KvmqError {
  if (error.code === -102) {
    return new StoreAuthError(
      `ZooKeeper refused access to ${error.path} (NO_AUTH): check the user:password in the store URL`,
      error,
    );
  }
  return new ZookeeperReplyError(`unexpected ZooKeeper reply: ${error.message}`, error, error.transient);
}
