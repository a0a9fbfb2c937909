/**
 * The Redis store: Carmine's key layout (src/stores/redis/keys.ts), every state
 * change one Lua script (src/stores/redis/lua/), the Redis server's clock for every
 * time, pub/sub wake-ups. See docs/redis.md.
 */
import { importDriver } from '../contract/driver.js';
import { claimMessages } from './claim.js';
import { StoreUnavailableError } from '../../model/errors.js';
import { closeConnection, openBlocking, openConnection, openSubscriber, type RedisConnection } from './connection.js';
import { readConfig, writeConfig } from './config.js';
import { ENQUEUE_CALL_MESSAGES, enqueueMessages } from './enqueue.js';
import { eventsHead, readEvents } from './events.js';
import { extendLocks, finishMessages } from './finish.js';
import { flowChildren, flowTree, linkReader, writeFlow } from './flows.js';
import { writeReports } from './reports.js';
import { withProgress } from '../contract/listing-progress.js';
import { collectGarbage } from './gc.js';
import { consumers, inspectMessage, messageStatus, queueStatus } from './inspect.js';
import { listMessages } from './list.js';
import {
  cancelMessage,
  promoteMessages,
  removeMessages,
  retryMessages,
  retryOldestFailed,
  updateMessage,
} from './actions.js';
import { queueKey, turnKey } from './keys.js';
import { QueueRegistry } from './registry.js';
import { Handoffs } from './handoffs.js';
import { fireSchedule, listSchedules, putSchedule, removeSchedule } from './schedules.js';
import { Scripts } from './scripts.js';
import { SCRIPTS } from './scripts.generated.js';
import { parseRedisUrl, type RedisUrlOptions } from './url.js';
import { Wakeups } from './wakeups.js';
import type { FlowNode } from '../../model/flow.js';
import type { ListQuery } from '../../model/list.js';
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
  HandoffListener,
  HandoffReceiver,
  HeldAttempt,
  NewMessage,
  Report,
  Store,
  StoreCapabilities,
  StoredDetails,
  StoredPage,
  StoredSchedule,
} from '../contract/contract.js';
import type {
  ActionResult,
  ConsumerInfo,
  EnqueueResult,
  GcResult,
  MessageStatus,
  QueueConfig,
  QueueStatus,
} from '../../model/types.js';

// Large values make every Redis client wait while they travel; bigger data belongs elsewhere.
const MAX_PAYLOAD_BYTES = 1024 * 1024;

export async function openRedisStore(url: string): Promise<Store> {
  const options = parseRedisUrl(url);
  const redis = await openConnection(options, 'kvmq');
  const { Command } = await importDriver('redis', () => import('ioredis'));
  const scripts = new Scripts(redis, options.prefix, options.where, Command);
  try {
    await scripts.loadAll();
  } catch (error) {
    redis.disconnect();
    throw error;
  }
  return new RedisStore(redis, scripts, options);
}

class RedisStore implements Store {
  readonly kind = 'redis';
  readonly capabilities: StoreCapabilities;
  private readonly prefix: string;
  private readonly where: string;
  private readonly wakeups: Wakeups;
  private readonly registry: QueueRegistry;
  /** Filter classes seen per queue, for consumers that filter. */
  private readonly classes = new Map<string, string[]>();
  /** The handoff receivers of this process's workers, by queue and consumer (handoffKey). */
  private readonly handoffs = new Map<string, Handoffs>();
  private closed = false;
  // Flows: a flow's messages may be in two queues, whose keys a cluster may keep on two slots; none there.
  readonly flow?: (messages: readonly FlowMessage[]) => Promise<void>;
  readonly flowTree?: (queue: string, id: string) => Promise<FlowNode | null>;
  readonly flowChildren?: (queue: string, id: string) => Promise<MessageStatus[]>;

  constructor(
    private readonly redis: RedisConnection,
    private readonly scripts: Scripts,
    private readonly url: RedisUrlOptions,
  ) {
    this.prefix = url.prefix;
    this.where = url.where;
    this.capabilities = {
      maxPayloadBytes: MAX_PAYLOAD_BYTES,
      wakeups: true,
      instantRelease: false,
      // A queue's keys share one slot; two queues' keys need not, and a script touches one slot.
      deadLetterQueue: !redis.isCluster,
      claimWithFinishes: true,
      overlapClaims: true,
      flows: !redis.isCluster,
      enqueueCallMessages: ENQUEUE_CALL_MESSAGES,
    };
    this.registry = new QueueRegistry(scripts, url.prefix);
    this.wakeups = new Wakeups(
      () => openSubscriber(url, 'kvmq-wakeups'),
      () => undefined,
    );
    if (!redis.isCluster) {
      const links = linkReader(scripts, url.prefix);
      this.flow = (messages) =>
        this.guard(async () => {
          for (const queue of new Set(messages.map((m) => m.queue))) await this.registry.add(queue);
          await writeFlow(scripts, messages);
        });
      this.flowTree = (queue, id) => this.guard(() => flowTree(scripts, links, queue, id));
      this.flowChildren = (queue, id) => this.guard(() => flowChildren(scripts, links, queue, id));
    }
    // Failures reach callers through their commands; reconnects are automatic.
    redis.on('error', () => undefined);
  }

  enqueue(queue: string, messages: readonly NewMessage[]): Promise<EnqueueResult[]> {
    return this.guard(async () => {
      await this.registry.add(queue);
      return enqueueMessages(this.scripts, queue, messages);
    });
  }

  claim(queue: string, request: ClaimRequest): Promise<ClaimResult> {
    const receiver = this.handoffs.get(handoffKey(queue, request.consumerId));
    const handoffs = receiver?.live === true && request.accepts === null ? receiver.claimArgument(request.lockMs) : '';
    return this.guard(() => claimMessages(this.scripts, this.classes, queue, request, this.where, handoffs));
  }

  receiveHandoffs(queue: string, consumerId: string, listener: HandoffListener): HandoffReceiver {
    const key = handoffKey(queue, consumerId);
    const list = `${queueKey(this.prefix, queue, 'idle-workers')}:${consumerId}`;
    const open = (): Promise<RedisConnection> => openBlocking(this.url, 'kvmq-handoffs');
    const receiver = new Handoffs(this.scripts, queue, consumerId, list, open, listener, this.where);
    this.handoffs.set(key, receiver);
    return {
      // Kept in the map until closed, so that a store closed meanwhile waits for its connection to go: a worker's
      // stop may give up on it first, and a connection left reconnecting would come back with the server.
      close: async () => {
        try {
          await receiver.close();
        } finally {
          if (this.handoffs.get(key) === receiver) this.handoffs.delete(key);
        }
      },
    };
  }

  extend(queue: string, consumerId: string, held: readonly HeldAttempt[], lockMs: number): Promise<string[]> {
    return this.guard(() => extendLocks(this.scripts, queue, consumerId, held, lockMs));
  }

  finish(queue: string, consumerId: string, finishes: readonly Finish[]): Promise<FinishResult[]> {
    return this.guard(() => finishMessages(this.scripts, queue, consumerId, finishes));
  }

  report(queue: string, consumerId: string, reports: readonly Report[]): Promise<FinishResult[]> {
    return this.guard(() => writeReports(this.scripts, queue, consumerId, reports));
  }

  status(queue: string, id: string): Promise<MessageStatus | null> {
    return this.guard(() => messageStatus(this.scripts, queue, id));
  }

  queueStatus(queue: string): Promise<QueueStatus> {
    return this.guard(() => queueStatus(this.scripts, queue, this.where));
  }

  list(queue: string, query: ListQuery): Promise<StoredPage> {
    return this.guard(async () => {
      const page = await listMessages(this.scripts, queue, query, this.where);
      const ids = page.messages.map((m) => m.status.id);
      if (ids.length === 0) return page;
      // Read just after the listing, not with it: what a listing shows of a running handler is a moment's anyway.
      const values = await this.redis.hmget(queueKey(this.prefix, queue, 'progress'), ...ids);
      const progress = new Map<string, string>();
      values.forEach((value, i) => value !== null && progress.set(ids[i] as string, value));
      return withProgress(page, progress);
    });
  }

  inspect(queue: string, id: string): Promise<StoredDetails | null> {
    return this.guard(() => inspectMessage(this.scripts, queue, id, this.where));
  }

  retry(queue: string, ids: readonly string[]): Promise<ActionResult[]> {
    return this.guard(() => retryMessages(this.scripts, queue, ids));
  }

  retryFailed(queue: string, max: number): Promise<number> {
    return this.guard(() => retryOldestFailed(this.scripts, queue, max));
  }

  remove(queue: string, ids: readonly string[]): Promise<ActionResult[]> {
    return this.guard(() => removeMessages(this.scripts, queue, ids));
  }

  cancel(queue: string, id: string, error: string): Promise<ActionResult> {
    return this.guard(() => cancelMessage(this.scripts, queue, id, error));
  }

  update(queue: string, id: string, edit: MessageEdit): Promise<ActionResult> {
    return this.guard(() => updateMessage(this.scripts, queue, id, edit));
  }

  /** cancel.lua publishes on the queue's wake channel, heard by the wake-ups' subscriber. */
  subscribeCancels(queue: string, listener: (canceled: CanceledMessage | null) => void): () => void {
    return this.wakeups.subscribeCancels(queueKey(this.prefix, queue, 'wake'), listener);
  }

  promote(queue: string, ids: readonly string[]): Promise<ActionResult[]> {
    return this.guard(() => promoteMessages(this.scripts, queue, ids));
  }

  clear(queues: readonly string[]): Promise<void> {
    return this.guard(async () => {
      // One script per queue: each queue's keys live in their own hash slot.
      await Promise.all(queues.map((queue) => this.scripts.run(SCRIPTS.clear, queue, [])));
      for (const queue of queues) this.classes.delete(queue);
    });
  }

  config(queue: string): Promise<QueueConfig> {
    return this.guard(() => readConfig(this.scripts, this.prefix, queue));
  }

  configure(queue: string, patch: Partial<QueueConfig>): Promise<Configured> {
    return this.guard(async () => {
      await this.registry.add(queue);
      // A dead-letter queue gets messages from this queue's scripts, which cannot add it to the registry.
      if (patch.deadLetterQueue !== undefined && patch.deadLetterQueue !== null && !this.redis.isCluster) {
        await this.registry.add(patch.deadLetterQueue);
      }
      return writeConfig(this.scripts, this.prefix, queue, patch, this.redis.isCluster);
    });
  }

  gc(queue: string, force: boolean): Promise<GcResult> {
    return this.guard(async () => collectGarbage(this.scripts, queue, await this.config(queue), force));
  }

  registerConsumer(queue: string, consumer: ConsumerRegistration): Promise<void> {
    return this.guard(async () => {
      await this.scripts.run(SCRIPTS.registerConsumer, queue, [
        consumer.id,
        consumer.host,
        consumer.pid,
        consumer.ttlMs,
      ]);
    });
  }

  unregisterConsumer(queue: string, consumerId: string): Promise<void> {
    return this.guard(async () => {
      await this.scripts.run(SCRIPTS.unregisterConsumer, queue, [consumerId]);
    });
  }

  consumers(queue: string): Promise<ConsumerInfo[]> {
    return this.guard(() => consumers(this.scripts, queue, this.where));
  }

  queues(): Promise<string[]> {
    return this.guard(() => this.registry.list());
  }

  readEvents(queue: string, after: string | null, limit: number): Promise<EventPage> {
    return this.guard(() => readEvents(this.scripts, queue, after, limit, this.where));
  }

  eventsHead(queue: string): Promise<string> {
    return this.guard(() => eventsHead(this.scripts, this.prefix, queue));
  }

  /** The scripts that write events publish on the queue's `events-wake` channel (same subscriber as wake-ups). */
  subscribeEvents(queue: string, listener: () => void): () => void {
    return this.wakeups.subscribe(queueKey(this.prefix, queue, 'events-wake'), listener);
  }

  putSchedule(queue: string, schedule: StoredSchedule): Promise<boolean> {
    return this.guard(async () => {
      await this.registry.add(queue);
      return putSchedule(this.scripts, this.prefix, queue, schedule);
    });
  }

  schedules(queue: string): Promise<StoredSchedule[]> {
    return this.guard(() => listSchedules(this.scripts, this.prefix, queue));
  }

  removeSchedule(queue: string, name: string): Promise<boolean> {
    return this.guard(() => removeSchedule(this.scripts, this.prefix, queue, name));
  }

  fireSchedule(
    queue: string,
    expected: StoredSchedule,
    nextAt: number,
    messages: readonly NewMessage[],
  ): Promise<EnqueueResult[] | null> {
    return this.guard(async () => {
      await this.registry.add(queue);
      return fireSchedule(this.scripts, queue, expected, nextAt, messages);
    });
  }

  /** SET NX PX: the turn is a flag whose TTL (the Redis server's clock) is `everyMs`. */
  takeTurn(queue: string, name: string, everyMs: number): Promise<boolean> {
    return this.guard(async () => {
      if (!Number.isSafeInteger(everyMs) || everyMs < 1) {
        throw new TypeError(`everyMs must be a whole number of milliseconds, at least 1 (got ${String(everyMs)})`);
      }
      const key = turnKey(this.prefix, queue, name);
      return (await this.scripts.call((redis) => redis.set(key, '1', 'PX', everyMs, 'NX'))) === 'OK';
    });
  }

  subscribe(queue: string, listener: () => void): () => void {
    return this.wakeups.subscribe(queueKey(this.prefix, queue, 'wake'), listener);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.handoffs.values()].map((receiver) => receiver.close().catch(() => undefined)));
    this.handoffs.clear();
    await this.wakeups.close();
    await closeConnection(this.redis);
  }

  private async guard<T>(fn: () => Promise<T>): Promise<T> {
    if (this.closed) throw new StoreUnavailableError('the Redis store is closed');
    return fn();
  }
}

function handoffKey(queue: string, consumerId: string): string {
  return `${queue}\n${consumerId}`;
}
