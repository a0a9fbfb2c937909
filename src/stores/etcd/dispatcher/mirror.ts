/**
 * A dispatcher's mirror of its queue: the messages it knows (each placed as
 * its record says: ready, waiting for a backoff, or held by a consumer), the
 * consumers and what each holds, and the plain producer keys not moved yet.
 * It changes only through these methods, fed by the snapshot, the watches
 * and the dispatcher's own Txns; a message's record mod revision orders it
 * all.
 */
import { FilterError } from '../../../model/errors.js';
import { applyConfigPatch, DEFAULT_QUEUE_CONFIG } from '../../../model/config.js';
import { classMatcher } from '../../../model/filters.js';
import { decodeEnvelope } from '../envelope.js';
import type { QueueKeys } from '../keys.js';
import { decodeRecord, type MessageRecord } from '../record.js';
import { acceptedByPairs, parseRegistration, type Registration } from '../registration.js';
import { TimeHeap } from './heap.js';
import { GroupGate } from './groups.js';
import { GroupRates } from './group-rates.js';
import { ReadyIndex, type Consumer, type Msg, type ProducerPut } from './model.js';
import type { KeyValue, WatchEvent } from '../kv.js';
import type { DispatcherLog } from './types.js';
import type { Snapshot } from './snapshot.js';
import type { QueueConfig } from '../../../model/types.js';

// Pending messages kept in memory when the newest are dropped (they stay in etcd and are read again later).
export const MEMORY_KEEP = 25_000;
// The ordered queue is read in windows of idx time, at most this many keys per read.
export const WINDOW_LIMIT = 1000;

export class QueueMirror {
  readonly msgs = new Map<string, Msg>();
  readonly ready = new ReadyIndex();
  readonly locks = new TimeHeap<Msg>();
  readonly groups = new GroupGate();
  /** groupRateLimit: each group's next start time, as stored (group-rates.ts). */
  readonly groupRates: GroupRates;
  readonly consumers = new Map<string, Consumer>();
  readonly producers = new Map<string, ProducerPut>();
  /** Plain producer puts whose id exists: refuse or revive, with the record read. */
  readonly duplicates = new Map<string, { record: MessageRecord; rev: number }>();
  /** Messages a plain consumer acked (deleted its delivery), to finish. */
  readonly acks = new Set<Msg>();
  /** Ordered keys deleted outside the protocol, to put back: the value, once known, and the delete's revision. */
  readonly restores = new Map<Msg, { value: Buffer | null; readonly deletedAt: number }>();
  /** Held by a consumer that is gone. */
  readonly orphans = new Set<Msg>();
  /** Their lock ran out: another consumer may take them. */
  readonly expired = new Set<Msg>();
  /** Producer prefixes with pages not read yet: prefix → first key not read. */
  readonly producerCursors = new Map<string, string>();
  private readonly warned = new Set<string>();
  config: QueueConfig = DEFAULT_QUEUE_CONFIG;
  /** The rate limit's stored `tat` and its mod revision (0: absent), compared by the Txn that charges it. */
  rate = { tat: 0, rev: 0 };
  /** A Txn charging the rate limit is in flight: the next charge waits for its answer. */
  rateInFlight = false;
  /** The rate limit holds ready messages back until then; null when it does not. */
  rateWakeAt: number | null = null;
  lockedCount = 0;
  payloadBytes = 0;
  orderedCount = 0;
  producerCount = 0;
  /** Ordered keys at or after this are not in memory (read later); null when all are. */
  cursor: string | null = null;
  /** More of the queue (or of the producer keys) is being read: the intake defers what depends on it. */
  reading = false;
  /** Messages whose record changed while reading: what the read found of them may be older. */
  readonly changedWhileReading = new Set<string>();

  constructor(
    readonly keys: QueueKeys,
    private readonly log: DispatcherLog,
  ) {
    this.groupRates = new GroupRates(keys);
  }

  /** Messages waiting or held (for envelopes and answers). */
  queueSize(): number {
    return Math.max(0, this.orderedCount) + Math.max(0, this.producerCount);
  }

  /** Ready messages worth holding before reading more of the queue: a few rounds of every consumer's room. */
  lookahead(): number {
    let room = 0;
    for (const c of this.consumers.values()) room += Math.max(0, c.reg.capacity);
    return Math.min(MEMORY_KEEP, 4 * room + WINDOW_LIMIT / 2);
  }

  /** Pending messages held in memory. */
  get pendingCount(): number {
    return this.msgs.size - this.lockedCount;
  }

  adoptSnapshot(s: Snapshot): void {
    if (s.config !== null) this.onConfig(s.config.value);
    if (s.rate !== null) this.rate = { tat: Number(s.rate.value.toString('utf8')) || 0, rev: s.rate.modRevision };
    this.groupRates.adopt(s.groupRates);
    for (const kv of s.consumerKvs) {
      const parsed = this.keys.parse(kv.key);
      if (parsed.kind === 'registration') this.onRegistration(kv);
    }
    const now = Date.now();
    for (const { kv, record: recordKv } of s.deliveries) {
      const parsed = this.keys.parse(kv.key);
      if (parsed.kind !== 'delivery') continue;
      const record = recordKv === null ? null : decodeRecord(recordKv.value);
      if (
        recordKv === null ||
        record?.phase !== 'locked' ||
        record.consumer !== parsed.consumerKey ||
        record.idx !== parsed.idx
      ) {
        this.warnOnce(kv.key, `ignoring ${kv.key}: no message record says it is delivered there`);
        continue;
      }
      // A plain consumer's delivery is the payload; otherwise (a kvmq consumer, or one gone) it is read again.
      const consumer = this.consumers.get(parsed.consumerKey);
      const payload =
        consumer === undefined ? null : consumer.reg.envelope ? (decodeEnvelope(kv.value)?.payload ?? null) : kv.value;
      this.adopt(parsed.id, record, recordKv.modRevision, payload, now);
    }
    for (const page of s.producerPages) {
      for (const kv of page.kvs) this.addProducer(kv);
      if (page.next !== null) this.producerCursors.set(page.prefix, page.next);
    }
    this.producerCount = this.producers.size + (this.producerCursors.size > 0 ? WINDOW_LIMIT : 0);
    this.orderedCount = s.orderedCount;
    this.cursor = s.firstOrdered?.key ?? null;
  }

  addProducer(kv: KeyValue): void {
    const parsed = this.keys.parse(kv.key);
    if (parsed.kind !== 'producer') {
      this.warnOnce(kv.key, `ignoring ${kv.key}: ${parsed.kind === 'foreign' ? parsed.why : 'not a producer key'}`);
      return;
    }
    const existing = this.producers.get(kv.key);
    if (existing?.busy === true) return;
    this.producers.set(kv.key, {
      key: kv.key,
      id: parsed.id,
      value: kv.value,
      modRevision: kv.modRevision,
      busy: false,
    });
  }

  onRegistration(kv: KeyValue): void {
    const reg = parseRegistration(kv.value);
    let consumer = this.consumers.get(kv.key);
    if (consumer === undefined) {
      consumer = {
        key: kv.key,
        prefix: `${kv.key}/`,
        reg,
        lease: kv.lease,
        since: kv.createRevision,
        held: new Set(),
        reserved: 0,
        accepts: null,
        // After a takeover every request is answered once more: the old dispatcher may have died first.
        answered: 0,
        owed: false,
        lastGiven: 0,
      };
      this.consumers.set(kv.key, consumer);
      // It may be back (same id, new lease) for messages it held.
      for (const msg of this.orphans) {
        if (msg.consumerKey === kv.key) {
          this.orphans.delete(msg);
          consumer.held.add(msg);
        }
      }
    }
    // A new request may take messages parked for want of a consumer asking (groups.ts Appetite).
    if (reg.ask !== consumer.reg.ask || consumer.held.size === 0) this.groups.limitChanged();
    consumer.reg = reg;
    consumer.lease = kv.lease;
    if (reg.ask < consumer.answered) consumer.answered = reg.ask;
    consumer.accepts = this.matcher(kv.key, reg);
  }

  onUnregistration(key: string): void {
    const consumer = this.consumers.get(key);
    if (consumer === undefined) return;
    this.consumers.delete(key);
    for (const msg of consumer.held) this.orphans.add(msg);
    consumer.held.clear();
  }

  matcher(key: string, reg: Registration): ((filterClass: string) => boolean) | null {
    if (reg.invalid !== null) {
      this.warnOnce(`${key}#${reg.invalid}`, `consumer ${key} gets nothing: ${reg.invalid}`);
      return null;
    }
    if (reg.accepts !== null) {
      const pairs = new Set(reg.accepts);
      return (filterClass) => acceptedByPairs(pairs, filterClass);
    }
    if (reg.filters !== null) {
      try {
        return classMatcher(this.keys.queue, reg.filters, this.config);
      } catch (error) {
        if (!(error instanceof FilterError)) throw error;
        this.warnOnce(`${key}#${error.message}`, `consumer ${key} gets nothing: ${error.message}`);
        return null;
      }
    }
    return () => true;
  }

  onConfig(value: Buffer | null): void {
    let config: QueueConfig = DEFAULT_QUEUE_CONFIG;
    if (value !== null) {
      try {
        config = applyConfigPatch(DEFAULT_QUEUE_CONFIG, JSON.parse(value.toString('utf8')) as Partial<QueueConfig>);
      } catch {
        this.warnOnce(this.keys.config, `ignoring ${this.keys.config}: not a kvmq configuration`);
      }
    }
    if (
      config.groupConcurrency !== this.config.groupConcurrency ||
      config.groupRateLimit?.max !== this.config.groupRateLimit?.max ||
      config.groupRateLimit?.perMs !== this.config.groupRateLimit?.perMs
    )
      this.groups.limitChanged();
    this.config = config;
    for (const consumer of this.consumers.values()) consumer.accepts = this.matcher(consumer.key, consumer.reg);
  }

  adopt(id: string, record: MessageRecord, rev: number, payload: Buffer | null, now: number): Msg {
    const msg: Msg = {
      id,
      orderedKey: this.keys.ordered(record.idx ?? '', id),
      record,
      rev,
      payload: null,
      consumerKey: null,
      deliveryKey: null,
      notTo: null,
      busy: false,
      ackedKey: null,
      nextPayload: null,
      entry: null,
      noDeadLetter: false,
    };
    this.msgs.set(id, msg);
    this.setPayload(msg, payload);
    this.place(msg, now);
    return msg;
  }

  /** The message's record changed (by anyone): its place follows the record. */
  reconcile(msg: Msg, record: MessageRecord, rev: number, orderedValue: Buffer | null): void {
    if (record.phase === 'done' || record.idx === null) {
      this.forget(msg);
      return;
    }
    const orderedKey = this.keys.ordered(record.idx, msg.id);
    if (orderedKey !== msg.orderedKey) {
      msg.orderedKey = orderedKey;
      this.setPayload(msg, orderedValue);
    } else if (orderedValue !== null) {
      this.setPayload(msg, orderedValue);
    }
    msg.record = record;
    msg.rev = rev;
    this.place(msg, Date.now());
  }

  place(msg: Msg, now: number): void {
    const r = msg.record;
    this.unplace(msg, r.phase === 'locked' ? r.consumer : null);
    if (r.phase === 'pending') {
      this.ready.file(msg, now);
      return;
    }
    if (r.phase !== 'locked' || r.consumer === null || r.idx === null) return;
    this.lockedCount += 1;
    this.groups.hold(msg, r.group);
    msg.consumerKey = r.consumer;
    msg.deliveryKey = this.keys.delivery(r.consumer, r.idx, msg.id);
    const consumer = this.consumers.get(r.consumer);
    if (consumer === undefined) this.orphans.add(msg);
    else consumer.held.add(msg);
    if (r.lockUntil !== null) {
      if (r.lockUntil <= now) this.expired.add(msg);
      else this.locks.push(r.lockUntil, msg);
    }
  }

  /** `stays`: the consumer that holds it again at once (a lock renewed): it gave no room back. */
  unplace(msg: Msg, stays: string | null = null): void {
    this.ready.unfile(msg);
    this.groups.unhold(msg);
    if (msg.consumerKey !== null) {
      this.lockedCount -= 1;
      const holder = this.consumers.get(msg.consumerKey);
      if (holder?.held.delete(msg) === true && holder.reg.envelope && msg.consumerKey !== stays) {
        holder.owed = true;
        // It wants messages again (groups.ts Appetite): those parked for want of a taker are looked at again.
        this.groups.limitChanged();
      }
    }
    msg.consumerKey = null;
    msg.deliveryKey = null;
    this.orphans.delete(msg);
    this.expired.delete(msg);
  }

  forget(msg: Msg): void {
    this.unplace(msg);
    this.setPayload(msg, null);
    this.acks.delete(msg);
    this.restores.delete(msg);
    this.msgs.delete(msg.id);
  }

  setPayload(msg: Msg, payload: Buffer | null): void {
    if (msg.payload !== null) this.payloadBytes -= msg.payload.length;
    msg.payload = payload;
    if (payload !== null) this.payloadBytes += payload.length;
  }

  /** The rate key changed (the dispatcher's own charge, or a clear's delete). */
  onRate(event: WatchEvent): void {
    if (event.kv.modRevision < this.rate.rev) return;
    const tat = event.type === 'put' ? Number(event.kv.value.toString('utf8')) || 0 : 0;
    this.rate = { tat, rev: event.type === 'put' ? event.kv.modRevision : 0 };
  }

  /** Files again the parked messages of groups that have room now (and, under groupRateLimit, their slot). */
  unparkGroups(now: number): void {
    for (const group of this.groupRates.due(now)) this.groups.free(group);
    const limit = this.config.groupConcurrency;
    const rate = this.config.groupRateLimit;
    const room =
      rate === null
        ? limit
        : (group: string, held: number): number =>
            this.groupRates.free(rate, group, now) ? Math.min(1, (limit ?? Infinity) - held) : 0;
    for (const msg of this.groups.unpark(room, this.unparkable)) this.ready.file(msg, now);
  }

  // One function for every plan (planned before each delivery round), not a closure each time.
  private readonly unparkable = (msg: Msg): boolean =>
    this.msgs.get(msg.id) === msg && !msg.busy && msg.record.phase === 'pending' && msg.entry === null;

  beyondCursor(orderedKey: string): boolean {
    return this.cursor !== null && orderedKey >= this.cursor;
  }

  warnOnce(key: string, message: string): void {
    if (this.warned.has(key)) return;
    if (this.warned.size > 10_000) this.warned.clear();
    this.warned.add(key);
    this.log('warn', message);
  }
}
