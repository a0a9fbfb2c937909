/**
 * The dispatcher of one queue (the etcds seed's "queue leader"), running
 * while it holds the queue's election key. It mirrors the queue from one
 * snapshot and the watches after it (mirror.ts, watch-intake.ts), plans moves
 * (plan.ts) and makes them with guarded Txns (changes.ts): plain producer
 * keys into the ordered queue, ready messages to consumers with room,
 * deliveries of dead consumers and expired locks to others, and a plain
 * consumer's delete into the message's finish. Every Txn also compares the
 * election key's create revision, so a deposed dispatcher cannot write.
 *
 * It speaks only the KV port (../kv.ts), so `kvmq serve` runs it unchanged.
 */
import { setLongTimeout, type LongTimeout } from '../../../model/time.js';
import { decodeRecord } from '../record.js';
import { prefixEnd, type Compare, type KeyValue, type Kv, type Watch, type WatchEvent } from '../kv.js';
import { pack, runBatch, type Change } from '../txn-batch.js';
import { WatchIntake } from './watch-intake.js';
import { Loader, PAYLOAD_BUDGET_BYTES } from './load.js';
import { QueueMirror } from './mirror.js';
import { Planner, STALE_LOCK_GRACE_MS } from './plan.js';
import { ProgressWatch } from './progress.js';
import { readSnapshot } from './snapshot.js';
import type * as changes from './changes.js';
import type { QueueKeys } from '../keys.js';
import type { Consumer, Msg, ProducerPut } from './model.js';
import type { DeliveryListener, DispatcherDeps, DispatcherLog, Planned } from './types.js';

// Txns in flight at once: etcd batches concurrent proposals, so a few in flight raise throughput.
const MAX_IN_FLIGHT = 8;
// Pending messages held in memory before the newest are dropped (they stay in etcd, read again later).
const MEMORY_HIGH = 50_000;
const RETRY_AFTER_ERROR_MS = 500;

/** A change answered (whatever the answer): the message is free again, the consumer's slot no longer reserved. */
function settled(msg: Msg, consumer: Consumer | null): void {
  msg.busy = false;
  if (consumer !== null) consumer.reserved -= 1;
}

export class Dispatcher {
  private readonly kv: Kv;
  private readonly keys: QueueKeys;
  private readonly log: DispatcherLog;
  private readonly onDelivery: DeliveryListener | undefined;
  private readonly fence: Change;
  private readonly mirror: QueueMirror;
  private readonly intake: WatchIntake;
  private readonly planner: Planner;
  private readonly loader: Loader;
  private readonly progress: ProgressWatch;
  private readonly watches: Watch[] = [];
  private readonly queued: Planned[][] = [];
  private inFlight = 0;
  private scheduled = false;
  private timer: LongTimeout | null = null;
  private timerAt = Infinity;
  private stopped = false;
  private stopReason = '';
  private stalledOut = false;
  private resolveStopped: (reason: string) => void = () => undefined;
  readonly stoppedWith: Promise<string>;

  constructor(
    deps: DispatcherDeps,
    private readonly term: number,
  ) {
    this.progress = new ProgressWatch(deps.kv, deps.stallMs, (why) => {
      this.log('error', `dispatcher of ${deps.keys.queue} made no progress: ${why}; resigning`);
      this.stalledOut = true;
      this.stop(`no progress: ${why}`);
    });
    this.kv = this.progress.kv;
    this.keys = deps.keys;
    this.log = deps.log;
    this.onDelivery = deps.onDelivery;
    const fenceCompare: Compare = { key: this.keys.election, target: 'create', result: '=', operand: term };
    this.fence = { compares: [fenceCompare], ops: [], reads: [{ type: 'range', key: this.keys.election }] };
    this.mirror = new QueueMirror(this.keys, this.log);
    this.intake = new WatchIntake(this.mirror, term, (reason) => this.stop(reason), this.log);
    this.loader = new Loader(this.mirror, this.kv, this.log);
    this.planner = new Planner(this.mirror, {
      kv: this.kv,
      log: this.log,
      seenRevision: () => this.intake.seenRevision,
      change: (msg, consumer, ops) => this.change(msg, consumer, ops),
      producerChange: (put, consumer, ops) => this.producerChange(put, consumer, ops),
      fetchPayloads: (msgs) => void this.fetchPayloads(msgs),
      fetchNextPayload: (msg) => void this.fetchNextPayload(msg),
      fetchDeleted: (msg, deletedAt) => void this.fetchDeleted(msg, deletedAt),
    });
    this.stoppedWith = new Promise((resolve) => (this.resolveStopped = resolve));
  }

  /** Reads the queue and starts dispatching; resolves once running (or stopped). */
  async start(): Promise<void> {
    const snapshot = await readSnapshot(this.kv, this.keys);
    if (this.stopped) return;
    this.mirror.adoptSnapshot(snapshot);
    this.intake.startAt(snapshot.revision);
    const from = snapshot.revision + 1;
    const handler = (watchEvents: readonly WatchEvent[]): void => this.onWatchEvents(watchEvents);
    const broken = (error: Error): void => this.stop(`a watch broke (${error.message}); another start reads again`);
    for (const prefix of [this.keys.prefix, this.keys.shortPrefix]) {
      // The long prefix holds the ordered queue: its watch tells how far the mirror has seen it.
      const ordered = prefix === this.keys.prefix;
      const events = (batch: readonly WatchEvent[]): void => this.onWatchEvents(batch, ordered);
      this.watches.push(
        this.kv.watch({ key: prefix, end: prefixEnd(prefix), startRevision: from }, { events, broken }),
      );
    }
    this.watches.push(this.kv.watch({ key: this.keys.election, startRevision: from }, { events: handler, broken }));
    this.schedule();
  }

  stop(reason: string): void {
    if (this.stopped) return;
    this.stopped = true;
    this.stopReason = reason;
    this.progress.stop();
    this.timer?.clear();
    this.timer = null;
    for (const watch of this.watches) void watch.cancel();
    this.watches.length = 0;
    this.resolveStopped(reason);
  }

  get running(): boolean {
    return !this.stopped;
  }

  /** Stopped for making no progress: its candidate stands aside for a while, so another takes over. */
  get stalled(): boolean {
    return this.stalledOut;
  }

  /** For tests and logs. */
  describe(): string {
    const m = this.mirror;
    return (
      `${this.keys.queue}: ${m.msgs.size} messages in memory (${m.lockedCount} locked), ${m.consumers.size} consumers, ` +
      `${m.producers.size} producer keys, stopped=${this.stopped ? this.stopReason : 'no'}`
    );
  }

  private onWatchEvents(watchEvents: readonly WatchEvent[], ordered = false): void {
    if (this.stopped) return;
    this.intake.apply(watchEvents, ordered);
    this.schedule();
  }

  // ---- planning ----

  private schedule(delayMs = 0): void {
    if (this.stopped) return;
    if (delayMs > 0) {
      this.arm(Date.now() + delayMs);
      return;
    }
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      try {
        this.plan();
      } catch (error) {
        this.log(
          'error',
          `dispatcher of ${this.keys.queue} failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
        );
        this.stop('internal error');
      }
    });
  }

  private arm(at: number): void {
    if (this.stopped || at >= this.timerAt) return;
    this.timer?.clear();
    this.timerAt = at;
    this.timer = setLongTimeout(
      () => {
        this.timer = null;
        this.timerAt = Infinity;
        this.schedule();
      },
      Math.max(0, at - Date.now()) + 1,
    );
  }

  private plan(): void {
    if (this.stopped) return;
    const now = Date.now();
    const m = this.mirror;
    m.ready.promote(now);
    for (let due = m.locks.popDue(now); due !== null; due = m.locks.popDue(now)) {
      const msg = due.item;
      if (msg.record.phase === 'locked' && msg.record.lockUntil === due.time && msg.consumerKey !== null) {
        m.expired.add(msg);
      }
    }
    const { planned, starving } = this.planner.plan(now);
    this.submit(planned);
    this.planner.answers(starving, m.queueSize());
    if (!m.reading) {
      if (m.cursor !== null && (starving.length > 0 || m.ready.size < m.lookahead())) {
        this.exclusive(() => this.loader.window(), 'reading the queue');
      } else if (m.producers.size === 0 && m.producerCursors.size > 0) {
        this.exclusive(() => this.loader.producers(), 'reading producer keys');
      } else if (starving.length === 0 && (m.pendingCount > MEMORY_HIGH || m.payloadBytes > PAYLOAD_BUDGET_BYTES)) {
        this.loader.dropTail();
      }
    }
    let next = Math.min(
      m.ready.nextLater(),
      m.locks.peekTime(),
      m.rateWakeAt ?? Infinity,
      this.planner.holdEndsAt,
      // Groups waiting for their slot are looked at only while the queue runs; keys past their time, always.
      m.config.paused ? Infinity : m.groupRates.wakeAt,
      m.groupRates.sweepAt(),
    );
    for (const msg of m.expired) next = Math.min(next, (msg.record.lockUntil ?? Infinity) + STALE_LOCK_GRACE_MS);
    if (next < Infinity) this.arm(next);
  }

  /**
   * Reads more of the queue. Meanwhile the watch events of messages not in memory and of producer keys wait (the
   * intake defers them), so none is judged against a half-read window; the others, such as finishes that
   * give consumers room, apply at once.
   */
  private exclusive(task: () => Promise<void>, what: string): void {
    this.mirror.reading = true;
    void task()
      .catch(async (error: unknown) => {
        this.log(
          'warn',
          `${what} ${this.keys.queue} failed (${error instanceof Error ? error.message : String(error)}); retrying`,
        );
        await new Promise((resolve) => setTimeout(resolve, RETRY_AFTER_ERROR_MS));
      })
      .finally(() => {
        this.mirror.reading = false;
        this.mirror.changedWhileReading.clear();
        if (!this.stopped) this.intake.replay();
        this.schedule();
      });
  }

  private async fetchPayloads(msgs: readonly Msg[]): Promise<void> {
    for (const msg of msgs) msg.busy = true;
    let delay = 0;
    try {
      if (!(await this.loader.payloads(msgs))) delay = RETRY_AFTER_ERROR_MS;
    } catch (error) {
      this.log('warn', `reading payloads failed (${String(error)}); retrying`);
      delay = RETRY_AFTER_ERROR_MS;
    } finally {
      for (const msg of msgs) {
        msg.busy = false;
        if (this.mirror.msgs.get(msg.id) === msg) this.mirror.place(msg, Date.now());
      }
      this.schedule(delay);
    }
  }

  private async fetchNextPayload(msg: Msg): Promise<void> {
    msg.busy = true;
    try {
      await this.loader.nextPayload(msg);
    } catch (error) {
      this.log('warn', `reading the next payload of ${msg.id} failed: ${String(error)}`);
    } finally {
      msg.busy = false;
      this.mirror.acks.add(msg);
      this.schedule(msg.nextPayload === null ? RETRY_AFTER_ERROR_MS : 0);
    }
  }

  private async fetchDeleted(msg: Msg, deletedAt: number): Promise<void> {
    msg.busy = true;
    let delay = 0;
    try {
      const res = await this.kv.range({ key: msg.orderedKey, revision: deletedAt - 1 });
      const entry = this.mirror.restores.get(msg);
      const value = res.kvs[0]?.value;
      if (entry !== undefined && value !== undefined) entry.value = value;
      else if (entry !== undefined) {
        this.mirror.restores.delete(msg);
        this.log(
          'error',
          `${msg.orderedKey} was deleted and its payload is unknown: message ${msg.id} cannot be restored`,
        );
      }
    } catch (error) {
      const text = error instanceof Error ? error.message : String(error);
      if (/compacted/.test(text)) {
        this.mirror.restores.delete(msg);
        this.log(
          'error',
          `${msg.orderedKey} was deleted and its history compacted: message ${msg.id} cannot be restored`,
        );
      } else {
        this.log('warn', `reading the deleted ${msg.orderedKey} failed (${text}); retrying`);
        delay = RETRY_AFTER_ERROR_MS;
      }
    } finally {
      msg.busy = false;
      this.schedule(delay);
    }
  }

  // ---- Txns ----

  /** Wraps a message change: busy while in flight, the consumer's slot reserved, state from the result. */
  private change(msg: Msg, consumer: Consumer | null, ops: changes.Ops): Planned {
    msg.busy = true;
    this.mirror.ready.unfile(msg);
    if (consumer !== null) consumer.reserved += 1;
    return plannedChange(ops, {
      onOk: (revision) => {
        settled(msg, consumer);
        if (consumer !== null) {
          consumer.lastGiven = Date.now();
          // A delivery is the answer it waits for.
          consumer.owed = false;
          this.told(consumer, ops, revision);
        }
        if (this.mirror.msgs.get(msg.id) !== msg) return;
        if (ops.writesRecord === false) this.mirror.place(msg, Date.now());
        else if (ops.record === null || ops.record.phase === 'done' || ops.record.phase === 'failed')
          this.mirror.forget(msg);
        else this.mirror.reconcile(msg, ops.record, revision, null);
        if (consumer !== null) msg.notTo = null;
        this.afterChange(msg);
      },
      onFail: (reads) => {
        settled(msg, consumer);
        this.refresh(msg, reads[0]?.kvs[0] ?? null);
        this.afterChange(msg);
      },
      onError: () => {
        settled(msg, consumer);
        if (this.mirror.msgs.get(msg.id) === msg) this.mirror.place(msg, Date.now());
        this.afterChange(msg);
      },
    });
  }

  /** After a change answered: an ack of the delivery it made or kept, seen meanwhile, is made now. */
  private afterChange(msg: Msg): void {
    if (msg.ackedKey !== null) {
      if (msg.ackedKey === msg.deliveryKey) this.mirror.acks.add(msg);
      msg.ackedKey = null;
    }
  }

  /** Hands a delivery just written to a listening consumer in this process. */
  private told(consumer: Consumer, ops: changes.Ops, revision: number): void {
    if (this.onDelivery === undefined) return;
    for (const op of ops.ops) {
      if (op.type !== 'put' || !op.key.startsWith(consumer.prefix)) continue;
      const kv = {
        key: op.key,
        value: op.value,
        createRevision: revision,
        modRevision: revision,
        version: 1,
        lease: '0',
      };
      this.onDelivery(consumer.key, { type: 'put', kv, prevKv: null });
    }
  }

  /** After a failed Txn: the record as it is now. */
  private refresh(msg: Msg, kv: KeyValue | null): void {
    if (this.mirror.msgs.get(msg.id) !== msg) return;
    if (kv === null) {
      this.mirror.forget(msg);
      return;
    }
    const record = decodeRecord(kv.value);
    if (record === null) {
      this.mirror.warnOnce(kv.key, `${kv.key} is not a record kvmq wrote; message ${msg.id} is left alone`);
      this.mirror.forget(msg);
      return;
    }
    // The read is as of the Txn, which the watch may have overtaken (an update's new record seen first): only newer.
    if (kv.modRevision > msg.rev) this.mirror.reconcile(msg, record, kv.modRevision, null);
    else this.mirror.place(msg, Date.now());
  }

  private producerChange(put: ProducerPut, consumer: Consumer | null, ops: changes.Ops): Planned {
    put.busy = true;
    if (consumer !== null) consumer.reserved += 1;
    const settle = (): void => {
      put.busy = false;
      if (consumer !== null) consumer.reserved -= 1;
    };
    return plannedChange(ops, {
      onOk: (revision) => {
        settle();
        if (this.mirror.producers.get(put.key) === put) this.mirror.producers.delete(put.key);
        if (consumer !== null) {
          consumer.lastGiven = Date.now();
          consumer.owed = false;
          this.told(consumer, ops, revision);
        }
        if (ops.record !== null && !this.mirror.msgs.has(put.id))
          this.mirror.adopt(put.id, ops.record, revision, put.value, Date.now());
      },
      onFail: (reads) => {
        settle();
        const now = reads[0]?.kvs[0] ?? null;
        const record = reads[1]?.kvs[0] ?? null;
        if (now?.modRevision !== put.modRevision) {
          if (this.mirror.producers.get(put.key) === put) this.mirror.producers.delete(put.key);
          if (now !== null) this.mirror.addProducer(now);
          return;
        }
        if (record !== null && ops.ops.length > 1) {
          const decoded = decodeRecord(record.value);
          if (decoded === null) {
            this.mirror.warnOnce(put.key, `${put.key} waits: the record of ${put.id} is not one kvmq wrote`);
            return;
          }
          this.mirror.duplicates.set(put.key, { record: decoded, rev: record.modRevision });
        }
      },
      onError: settle,
    });
  }

  private submit(planned: readonly Planned[]): void {
    if (planned.length === 0) return;
    for (const batch of pack(planned, this.fence)) this.queued.push(batch);
    this.pump();
  }

  private pump(): void {
    while (this.inFlight < MAX_IN_FLIGHT && this.queued.length > 0) {
      const batch = this.queued.shift();
      if (batch === undefined) break;
      this.inFlight += 1;
      void this.execute(batch);
    }
  }

  private async execute(batch: readonly Planned[]): Promise<void> {
    let delay = 0;
    try {
      if (this.stopped) {
        for (const change of batch) change.onError();
        return;
      }
      const { results, fixedReads } = await runBatch(this.kv, batch, this.fence);
      if (!this.running) return;
      const first = results[0];
      if (first !== undefined && !first.ok) {
        const election = fixedReads[0]?.kvs[0];
        if (election?.createRevision !== this.term) {
          for (const change of batch) change.onError();
          this.stop('the election key is no longer ours (our lease ended)');
          return;
        }
      }
      batch.forEach((change, i) => {
        const result = results[i];
        if (result === undefined) change.onError();
        else if (result.ok) change.onOk(result.revision);
        else change.onFail(result.reads);
      });
    } catch (error) {
      for (const change of batch) change.onError();
      this.log(
        'warn',
        `dispatcher of ${this.keys.queue}: a Txn failed (${error instanceof Error ? error.message : String(error)}); retrying`,
      );
      delay = RETRY_AFTER_ERROR_MS;
    } finally {
      this.inFlight -= 1;
      this.pump();
      this.schedule(delay);
    }
  }
}

/** A change's Txn parts, with what to do on each answer. */
function plannedChange(ops: changes.Ops, answers: Pick<Planned, 'onOk' | 'onFail' | 'onError'>): Planned {
  return { compares: ops.compares, ops: ops.ops, reads: ops.reads, events: ops.events, counts: ops.counts, ...answers };
}
