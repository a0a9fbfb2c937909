/**
 * One kvmq consumer (a worker, or any id that claims) as the etcds protocol
 * sees it: a registration `/queue/{q}/consumer/{id}` on the process's session
 * lease that says how many deliveries it takes (capacity), which filter
 * classes and how long a lock lasts; and its inbox, the deliveries the
 * dispatcher puts under that key, followed with a watch. `claim` hands out
 * what the inbox holds. When the consumer asks for more room it bumps `ask`,
 * and the dispatcher answers at `{registration}/answer` once it has given
 * what it could, so a claim knows when "nothing yet" means "nothing".
 */
import { decodeEnvelope } from './envelope.js';
import { prefixEnd, type Kv, type Watch, type WatchEvent } from './kv.js';
import { encodeKvmqRegistration, type KvmqRegistration } from './registration.js';
import type { MessageRecord } from './record.js';
import type { StoredReport } from '../contract/contract.js';
import type { QueueKeys } from './keys.js';

export interface Delivery {
  readonly key: string;
  readonly id: string;
  readonly idx: string;
  /** The revision of the delivery's put. */
  readonly deliveredAt: number;
  /** The record as of `rev`, its mod revision (kept current by extends). */
  record: MessageRecord;
  rev: number;
  readonly payload: Buffer;
  readonly queueSize: number;
  /** Handed to the worker by a claim. */
  claimed: boolean;
  /** This consumer is deleting it (a finish, a release): its delete is no news. */
  leaving?: boolean;
  /** Its reports as stored, once a handler reported (only this holder writes them while it holds it). */
  report?: StoredReport;
}

export interface Demand {
  readonly capacity: number;
  readonly lockMs: number;
  readonly accepts: readonly string[] | null;
}

function sameList(a: readonly string[] | null, b: readonly string[] | null): boolean {
  if (a === null || b === null) return a === b;
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

let started = 0;

export class LocalConsumer {
  readonly key: string;
  readonly deliveries = new Map<string, Delivery>();
  /** Messages failing now whose id the dead-letter queue holds already: they stay failed here. */
  readonly noDeadLetter = new Set<string>();
  /** Deliveries it finished, by the revision of the finish, until their delete events come. */
  private readonly gone = new Map<string, number>();
  private registration: KvmqRegistration;
  private registeredLease: string | null = null;
  private registering: Promise<void> | null = null;
  private answered = 0;
  /** The last answer said the queue's rate limit holds messages back until then (null: it did not). */
  rateWakeAt: number | null = null;
  /** The revision of the last delivery or answer seen. */
  private heard = 0;
  /** Its inbox is known up to this revision (its watch's events, or a read of the whole inbox). */
  private seen = 0;
  /** The revision of its last finish: room given back, which the dispatcher answers with a delivery or an answer. */
  private freedAt = 0;
  private watch: Watch | null = null;
  private waiters = new Set<() => void>();
  private closed = false;
  /** The last queue size an answer or a delivery reported, and when. */
  private lastQueueSize = 0;
  private lastQueueSizeAt = 0;

  constructor(
    private readonly kv: Kv,
    readonly keys: QueueKeys,
    readonly id: string,
    info: { host: string; pid: number; lockMs: number },
    private readonly onDelivery: () => void,
    /** A delivery its worker holds was deleted by another writer (a cancel, a lock taken back). */
    private readonly onTakenAway: () => void = () => undefined,
  ) {
    this.key = keys.consumer(id);
    const now = Date.now();
    this.registration = {
      host: info.host,
      pid: info.pid,
      startedAt: now,
      seq: ++started,
      seenAt: now,
      capacity: 0,
      lockMs: info.lockMs,
      accepts: null,
      ask: 0,
    };
  }

  get info(): KvmqRegistration {
    return this.registration;
  }

  /** A request the dispatcher has not answered yet, or room given back it has not answered. */
  get waitingForAnswer(): boolean {
    return this.registration.ask > this.answered || this.freedAt > this.heard;
  }

  private sized(queueSize: number): void {
    this.lastQueueSize = queueSize;
    this.lastQueueSizeAt = Date.now();
  }

  knownQueueSize(): number {
    return this.lastQueueSize;
  }

  /** The queue size the dispatcher last reported, if it did so within `ms`. */
  freshQueueSize(ms: number): number | null {
    return Date.now() - this.lastQueueSizeAt <= ms ? this.lastQueueSize : null;
  }

  /** Its finish (or release) at `revision` gave room back. */
  freed(revision: number): void {
    this.freedAt = Math.max(this.freedAt, revision);
  }

  /** Writes the registration (and starts following the inbox) if it is not in etcd under the current lease. */
  async ensureRegistered(): Promise<void> {
    const lease = await this.kv.session.leaseId();
    if (this.registeredLease === lease) return;
    this.registering ??= this.register(lease).finally(() => (this.registering = null));
    await this.registering;
  }

  private async register(lease: string): Promise<void> {
    // Deliveries already there (a re-registration after a lost lease) come first, then the watch.
    const prefix = `${this.key}/`;
    const res = await this.kv.range({ key: prefix, end: prefixEnd(prefix) });
    const present = new Set<string>();
    for (const kv of res.kvs) {
      present.add(kv.key);
      this.learn({ type: 'put', kv, prevKv: null });
    }
    // Gone at the read's revision; a delivery the watch (or this process's dispatcher) brought after it stays.
    for (const [key, d] of [...this.deliveries]) {
      if (!present.has(key) && d.deliveredAt <= res.revision) this.deliveries.delete(key);
    }
    this.seen = Math.max(this.seen, res.revision);
    if (this.watch === null) {
      this.watch = this.kv.watch(
        { key: prefix, end: prefixEnd(prefix), startRevision: res.revision + 1 },
        {
          events: (events) => {
            for (const event of events) this.onWatchEvent(event);
          },
          broken: () => {
            // Read the inbox again from scratch at the next registration.
            this.watch = null;
            this.registeredLease = null;
          },
        },
      );
    }
    await this.write(lease, true);
  }

  /** The session lease was lost: etcd removed the registration; write it again on next use. */
  leaseLost(): void {
    this.registeredLease = null;
  }

  /** Updates host details and refreshes `seenAt` (rewritten only when stale). */
  async touch(info: { host: string; pid: number; lockMs: number }, staleAfterMs: number): Promise<void> {
    const changed =
      info.host !== this.registration.host ||
      info.pid !== this.registration.pid ||
      info.lockMs !== this.registration.lockMs;
    this.registration = { ...this.registration, host: info.host, pid: info.pid, lockMs: info.lockMs };
    await this.ensureRegistered();
    if (changed || Date.now() - this.registration.seenAt > staleAfterMs) await this.put(false);
  }

  /** Sets what the consumer takes; a change is written with a new `ask`, which the dispatcher answers. */
  /** `ask`: ask even when the demand is unchanged, so the answer comes after what the dispatcher has seen since. */
  async demand(d: Demand, ask = false): Promise<void> {
    await this.ensureRegistered();
    const r = this.registration;
    if (!ask && r.capacity === d.capacity && r.lockMs === d.lockMs && sameList(r.accepts, d.accepts)) return;
    this.registration = { ...r, capacity: d.capacity, lockMs: d.lockMs, accepts: d.accepts };
    await this.put(true);
  }

  private async put(ask: boolean): Promise<void> {
    await this.write(await this.kv.session.leaseId(), ask);
  }

  /** Writes the registration under `lease`; `ask`: as a new request, which the dispatcher answers. */
  private async write(lease: string, ask: boolean): Promise<void> {
    this.registration = { ...this.registration, seenAt: Date.now(), ask: this.registration.ask + (ask ? 1 : 0) };
    await this.kv.txn({
      compare: [],
      success: [{ type: 'put', key: this.key, value: encodeKvmqRegistration(this.registration), lease }],
    });
    this.registeredLease = lease;
  }

  /** Waits until the dispatcher answered the last request or something arrived, at most `ms`. */
  async waitForAnswer(ms: number, enough: () => boolean): Promise<boolean> {
    if (!this.waitingForAnswer || enough()) return true;
    return new Promise((resolve) => {
      const check = (): void => {
        if (!this.waitingForAnswer || enough() || this.closed) finish(true);
      };
      const timer = setTimeout(() => finish(false), ms);
      const finish = (answered: boolean): void => {
        clearTimeout(timer);
        this.waiters.delete(check);
        resolve(answered);
      };
      this.waiters.add(check);
    });
  }

  /** Unclaimed deliveries, oldest first. */
  unclaimed(): Delivery[] {
    return [...this.deliveries.values()]
      .filter((d) => !d.claimed)
      .sort((a, b) => (a.idx < b.idx ? -1 : a.idx > b.idx ? 1 : 0));
  }

  /** How many unclaimed() holds, without the array or the sort (a claim's wait checks it on every event). */
  unclaimedCount(): number {
    let n = 0;
    for (const d of this.deliveries.values()) if (!d.claimed) n += 1;
    return n;
  }

  claimedCount(): number {
    let n = 0;
    for (const d of this.deliveries.values()) if (d.claimed) n += 1;
    return n;
  }

  byId(id: string): Delivery | undefined {
    for (const d of this.deliveries.values()) if (d.id === id) return d;
    return undefined;
  }

  /**
   * It finished (or lost) a delivery at `revision`: a late watch event of that delivery is not taken again. A
   * delivery under the same key made after that revision stays: the message handed to this consumer again once
   * the finish let it go, which this process's dispatcher can tell before the finish's answer comes back.
   */
  removed(key: string, revision: number): void {
    const known = this.deliveries.get(key);
    if (known === undefined || known.deliveredAt <= revision) this.deliveries.delete(key);
    this.gone.set(key, revision);
  }

  /**
   * A delivery this process's dispatcher just made, before its watch event comes. The Txn's answer can come
   * late (a lagging member): once the watch (or a read of the inbox) has passed its revision, it brings
   * nothing new, and taking it could revive a delivery already finished.
   */
  told(event: WatchEvent): void {
    this.learn(event);
  }

  /** An event of its inbox's watch, in revision order. */
  private onWatchEvent(event: WatchEvent): void {
    this.apply(event);
    this.seen = Math.max(this.seen, event.kv.modRevision);
  }

  /** What a read of the inbox or the dispatcher says, unless the watch has already told it. */
  private learn(event: WatchEvent): void {
    if (event.kv.modRevision > this.seen) this.apply(event);
  }

  private apply(event: WatchEvent): void {
    const parsed = this.keys.parse(event.kv.key);
    if (parsed.kind === 'answer') {
      if (event.type === 'put') {
        try {
          const answer = JSON.parse(event.kv.value.toString('utf8')) as {
            ask?: unknown;
            queueSize?: unknown;
            wakeAt?: unknown;
          };
          if (typeof answer.ask === 'number') this.answered = Math.max(this.answered, answer.ask);
          this.rateWakeAt = typeof answer.wakeAt === 'number' ? answer.wakeAt : null;
          if (typeof answer.queueSize === 'number') this.sized(answer.queueSize);
          this.heard = Math.max(this.heard, event.kv.modRevision);
        } catch {
          // Not an answer kvmq wrote; the wait times out instead.
        }
      }
    } else if (parsed.kind === 'delivery') {
      const known = this.deliveries.get(event.kv.key);
      const revision = event.kv.modRevision;
      if (event.type === 'delete') {
        // A late delete of an earlier delivery under the same key leaves a newer one alone.
        if (known === undefined || known.deliveredAt < revision) {
          this.deliveries.delete(event.kv.key);
          if (known?.claimed === true && known.leaving !== true) this.onTakenAway();
        }
        if ((this.gone.get(event.kv.key) ?? 0) <= revision) this.gone.delete(event.kv.key);
      } else {
        // Seen already (from this process's dispatcher, or a newer one), or finished before its watch event came.
        const stale = (known?.deliveredAt ?? 0) >= revision || (this.gone.get(event.kv.key) ?? 0) >= revision;
        // Decoded only when new: the watch event of a delivery handed over in this process is stale.
        const envelope = stale ? null : decodeEnvelope(event.kv.value);
        if (envelope !== null) {
          this.deliveries.set(event.kv.key, {
            deliveredAt: revision,
            key: event.kv.key,
            id: parsed.id,
            idx: parsed.idx,
            record: envelope.record,
            rev: event.kv.modRevision,
            payload: envelope.payload,
            queueSize: envelope.queueSize,
            claimed: known?.claimed === true && known.record.attempt === envelope.record.attempt,
          });
          this.sized(envelope.queueSize);
          this.heard = Math.max(this.heard, event.kv.modRevision);
          this.onDelivery();
        }
      }
    }
    if (this.waiters.size > 0) for (const waiter of [...this.waiters]) waiter();
  }

  /** Stops following the inbox. */
  async close(): Promise<void> {
    this.closed = true;
    for (const waiter of [...this.waiters]) waiter();
    const watch = this.watch;
    this.watch = null;
    if (watch !== null) await watch.cancel();
  }
}
