/**
 * What the dispatcher does next, from its mirror of the queue: finish plain
 * acks, put back ordered keys deleted outside the protocol, give the
 * deliveries of dead consumers and expired locks to others, hand ready
 * messages to consumers with room (oldest first, by filter class and free
 * room), move plain producers' puts into the ordered queue, and answer kvmq
 * consumers waiting to hear that nothing more is coming. Each change is
 * built by changes.ts and wrapped by the dispatcher (busy marks, slots).
 */
import { MAX_PAYLOAD_BYTES, newIdx, QueueKeys } from '../keys.js';
import { stateOf, type MessageRecord } from '../record.js';
import { MAX_TXN_BYTES } from '../txn-batch.js';
import { changeEvents, type EventNote } from '../event-ops.js';
import { registerOp } from '../queue-registry.js';
import { rateCharge, rateGrant, type RateGrant } from '../../../model/rate-limit.js';
import { chargeRate, RATE_TXN_BYTES, RATE_TXN_MESSAGES } from './rate.js';
import { Appetite } from './groups.js';
import type { GroupCharge } from './group-rates.js';
import { firstTold, PriorityOrder } from './priority-order.js';
import type { RateLimit } from '../../../model/types.js';
import * as changes from './changes.js';
import { freeSlots, type Consumer, type Msg, type ProducerPut } from './model.js';
import type { Kv } from '../kv.js';
import type { DispatcherLog, Planned } from './types.js';
import type { QueueMirror } from './mirror.js';

// An expired lock whose holder has not renewed it for this long more is given back to the queue.
export const STALE_LOCK_GRACE_MS = 10_000;

export interface PlannerDeps {
  readonly kv: Kv;
  readonly log: DispatcherLog;
  /** The revision up to which the mirror has seen every ordered key (events.ts). */
  seenRevision(): number;
  /** Wraps a message's change: busy while in flight, the consumer's slot reserved. */
  change(msg: Msg, consumer: Consumer | null, ops: changes.Ops): Planned;
  producerChange(put: ProducerPut, consumer: Consumer | null, ops: changes.Ops): Planned;
  /** Reads payloads not held in memory, then plans again. */
  fetchPayloads(msgs: readonly Msg[]): void;
  /** Reads the payload a plain ack of a requeued message needs, then plans again. */
  fetchNextPayload(msg: Msg): void;
  /** Reads the value an ordered key had before it was deleted outside the protocol, then plans again. */
  fetchDeleted(msg: Msg, deletedAt: number): void;
}

export class Planner {
  private deadLetterKeys: QueueKeys | null = null;
  private readonly appetite = new Appetite();
  /** The queue's registry entry: written with the first plain put this dispatcher moves (once per Txn at most). */
  private registry: 'unwritten' | 'writing' | 'written' = 'unwritten';
  /** Deliveries keep priority order across Txns in flight (priority-order.ts). */
  private readonly order: PriorityOrder;

  constructor(
    private readonly mirror: QueueMirror,
    private readonly deps: PlannerDeps,
  ) {
    this.order = new PriorityOrder(mirror.keys, () => deps.seenRevision());
  }

  /** When a hold on guarded deliveries ends at the latest (Infinity: none), to plan again then. */
  get holdEndsAt(): number {
    return this.order.holdEndsAt;
  }

  /** The keys of the dead-letter queue the configuration names, or null. */
  private deadLetter(): QueueKeys | null {
    const name = this.mirror.config.deadLetterQueue;
    if (name === null) return null;
    if (this.deadLetterKeys?.queue !== name) this.deadLetterKeys = new QueueKeys(this.mirror.keys.root, name);
    return this.deadLetterKeys;
  }

  /** A change with the events it writes in its Txn, while the queue's configuration has events on. */
  private noted(ops: changes.Ops, ...notes: EventNote[]): changes.Ops {
    // Events off: the change as built (no copy per delivery; the builders in changes.ts set no events).
    if (!this.mirror.config.events) return ops;
    return { ...ops, events: changeEvents(this.mirror.keys, true, ...notes) };
  }

  /** A delivery, with its `started` event. */
  private delivery(ops: changes.Ops, id: string): changes.Ops {
    if (!this.mirror.config.events) return ops;
    return this.noted(ops, { type: 'started', id, attempt: ops.record?.attempt ?? 0 });
  }

  /** A change that stores a plain put, with the queue's registry entry until one such change succeeded. */
  private producerChange(put: ProducerPut, consumer: Consumer | null, ops: changes.Ops): Planned {
    if (this.registry !== 'unwritten') return this.deps.producerChange(put, consumer, ops);
    this.registry = 'writing';
    ops.ops.push(registerOp(this.mirror.keys));
    const change = this.deps.producerChange(put, consumer, ops);
    return {
      ...change,
      onOk: (revision) => {
        this.registry = 'written';
        change.onOk(revision);
      },
      onFail: (reads) => {
        this.registry = 'unwritten';
        change.onFail(reads);
      },
      onError: () => {
        this.registry = 'unwritten';
        change.onError();
      },
    };
  }

  /** A message lost `maxDeliveries` times: failed, or moved to the dead-letter queue (unless its id is there). */
  private fail(msg: Msg, failed: MessageRecord, payload: Buffer, now: number): Planned {
    const dlq = msg.noDeadLetter ? null : this.deadLetter();
    const change = this.deps.change(
      msg,
      null,
      this.noted(changes.fail(this.mirror.keys, msg, failed, payload, dlq, now), {
        type: 'failed',
        id: msg.id,
        attempt: failed.attempt,
        error: failed.error,
      }),
    );
    if (dlq === null) return change;
    return {
      ...change,
      onFail: (reads) => {
        if (reads[1]?.kvs[0] !== undefined) msg.noDeadLetter = true;
        change.onFail(reads);
      },
    };
  }

  /** The changes to make now, and the consumers with room that nothing in memory fits (starving). */
  plan(now: number): { planned: Planned[]; starving: Consumer[] } {
    const planned: Planned[] = [];
    const size = this.mirror.queueSize();
    const paused = this.mirror.config.paused;
    this.planAcks(planned, now);
    for (const [msg, { value, deletedAt }] of this.mirror.restores) {
      if (msg.busy) continue;
      if (value === null) {
        this.deps.fetchDeleted(msg, deletedAt);
        continue;
      }
      this.mirror.restores.delete(msg);
      planned.push(this.deps.change(msg, null, changes.restore(this.mirror.keys, msg, value)));
    }
    this.planTakeovers(planned, size, now, paused);
    // Paused: nothing is delivered; consumers waiting to hear are told there is nothing for them.
    const starving = paused
      ? [...this.mirror.consumers.values()].filter((c) => c.accepts !== null && freeSlots(c) > 0)
      : this.planReady(planned, size, now);
    this.planProducers(planned, size, now, paused);
    for (const sweep of this.mirror.groupRates.sweep(now)) planned.push(sweep);
    return { planned, starving };
  }

  private planAcks(planned: Planned[], now: number): void {
    for (const msg of this.mirror.acks) {
      if (msg.busy) continue;
      this.mirror.acks.delete(msg);
      if (msg.record.phase !== 'locked') continue;
      if (msg.record.requeue && msg.record.nextEncoding !== null && msg.nextPayload === null) {
        this.deps.fetchNextPayload(msg);
        continue;
      }
      const attempt = msg.record.attempt;
      const ops = this.noted(changes.ack(this.mirror.keys, msg, now), { type: 'completed', id: msg.id, attempt });
      const change = this.deps.change(msg, null, ops);
      const rev = msg.rev;
      planned.push({
        ...change,
        onFail: (reads) => {
          change.onFail(reads);
          // Failed with the record as it was (a count slot changed): the ack is still to be made.
          if (reads[0]?.kvs[0]?.modRevision === rev && this.mirror.msgs.get(msg.id) === msg) this.mirror.acks.add(msg);
        },
      });
    }
  }

  /**
   * Deliveries of consumers that are gone, and locks that ran out, go to consumers with room (none while
   * paused). Each such take-back counts a lost delivery in the same Txn; at `maxDeliveries` the message
   * fails instead.
   */
  private planTakeovers(planned: Planned[], size: number, now: number, paused: boolean): void {
    const max = this.mirror.config.maxDeliveries;
    for (const msg of this.mirror.orphans) {
      if (msg.busy) continue;
      if (msg.payload === null) {
        this.deps.fetchPayloads([msg]);
        continue;
      }
      const lost = changes.lose(msg, max, now);
      if (lost.phase === 'failed') {
        planned.push(this.fail(msg, lost, msg.payload, now));
        continue;
      }
      const consumer = paused || !this.groupSlot(msg, now) ? null : this.pick(msg, null);
      if (consumer !== null) {
        const ops = this.delivery(
          changes.deliver(this.mirror.keys, msg, consumer, msg.payload, size, now, lost),
          msg.id,
        );
        planned.push(this.charged(this.chargeGroup(msg, now, ops), this.deps.change(msg, consumer, ops)));
      } else {
        planned.push(this.deps.change(msg, null, changes.undeliver(this.mirror.keys, msg, now, lost)));
      }
    }
    for (const msg of this.mirror.expired) {
      if (msg.busy) continue;
      if (msg.payload === null) {
        this.deps.fetchPayloads([msg]);
        continue;
      }
      // The holder let the lock run out: someone else takes it; it stays with the holder until then, unless
      // the holder stays silent so long that it has surely lost it: then it goes back to the queue, for anyone.
      const holder = msg.consumerKey;
      const consumer = paused || !this.groupSlot(msg, now) ? null : this.pick(msg, holder);
      const stale = now >= (msg.record.lockUntil ?? now) + STALE_LOCK_GRACE_MS;
      if (consumer === null && !stale) continue;
      const lost = changes.lose(msg, max, now);
      if (lost.phase === 'failed') {
        planned.push(this.fail(msg, lost, msg.payload, now));
        continue;
      }
      if (consumer === null) {
        msg.notTo = holder;
        planned.push(this.deps.change(msg, null, changes.undeliver(this.mirror.keys, msg, now, lost)));
        continue;
      }
      const ops = this.delivery(changes.deliver(this.mirror.keys, msg, consumer, msg.payload, size, now, lost), msg.id);
      const change = this.charged(this.chargeGroup(msg, now, ops), this.deps.change(msg, consumer, ops));
      planned.push({
        ...change,
        onOk: (revision) => {
          change.onOk(revision);
          msg.notTo = holder;
        },
      });
    }
  }

  /** Oldest ready message first, each to the consumer with the most room among those that take its class. */
  private planReady(planned: Planned[], size: number, now: number): Consumer[] {
    let free = [...this.mirror.consumers.values()].filter((c) => c.accepts !== null && freeSlots(c) > 0);
    const limit = this.mirror.config.groupConcurrency;
    this.mirror.unparkGroups(now);
    const rate = this.rateGrant(free, now);
    if (rate === 'wait') return [];
    if (rate !== null && rate.grant.granted === 0) return free;
    const rated: Planned[] = [];
    let ratedBytes = 0;
    // Lower priorities wait while a higher one's payload is read or delivery is in flight, or while a guard
    // failed (see held).
    let ceiling = this.order.held(now) ? 0 : this.order.flyingCeiling();
    while (free.length > 0) {
      if (rate !== null && rated.length >= rate.grant.granted) break;
      let best: Msg | null = null;
      let takers: Consumer[] = [];
      let parked = false;
      for (const head of this.mirror.ready.heads()) {
        const msg = head.msg;
        if (best !== null && msg.orderedKey >= best.orderedKey) continue;
        if (msg.record.priority > ceiling) continue;
        if (this.parkIfFull(msg, limit) || this.parkIfRated(msg, now)) {
          parked = true;
          continue;
        }
        const taking = free.filter((c) => c.accepts?.(head.filterClass) === true);
        // The consumer that let its lock on it run out is the last choice, not no choice.
        const others = msg.notTo === null ? taking : taking.filter((c) => c.key !== msg.notTo);
        let willing = others.length > 0 ? others : taking;
        if (msg.record.group !== null && willing.length > 0) {
          willing = willing.filter((c) => this.appetite.wants(c));
          if (willing.length === 0) {
            // Nobody asking takes it now: set aside until one asks, so what follows it can go.
            this.mirror.ready.unfile(msg);
            this.mirror.groups.park(msg, msg.record.group);
            parked = true;
            continue;
          }
        }
        if (willing.length === 0) continue;
        best = msg;
        takers = willing;
      }
      if (best === null) {
        // Heads whose group is full were set aside: the next ones may be takeable.
        if (parked) continue;
        break;
      }
      // A group's message (often a slot just freed) goes to the consumer that waited longest for one.
      const consumer = best.record.group === null ? this.choose(takers) : longestWaiting(takers);
      if (consumer === null) break;
      this.mirror.ready.unfile(best);
      if (best.payload === null) {
        this.deps.fetchPayloads([best]);
        ceiling = Math.min(ceiling, best.record.priority);
        continue;
      }
      if (rate !== null && rated.length > 0 && ratedBytes + best.payload.length > RATE_TXN_BYTES) break;
      this.appetite.given(consumer);
      const ops = this.delivery(changes.deliver(this.mirror.keys, best, consumer, best.payload, size, now), best.id);
      const msg = best;
      const charge = this.chargeGroup(best, now, ops);
      const change = this.grouped(
        best,
        this.order.guarded(best, ops, (guarded) => this.charged(charge, this.deps.change(msg, consumer, guarded))),
      );
      ceiling = Math.min(ceiling, best.record.priority);
      if (rate === null) planned.push(change);
      else {
        rated.push(change);
        ratedBytes += best.payload.length;
      }
      // Only the chosen consumer's room changed.
      if (freeSlots(consumer) <= 0) free = free.filter((c) => freeSlots(c) > 0);
    }
    if (rate !== null && rated.length > 0) {
      const tat = rateCharge(rate.limit, rate.grant, rated.length);
      planned.push(chargeRate(this.mirror, rated, tat));
      // Consumers left with room wait for the next slot, not for an end-of-queue backoff.
      if (free.length > 0 && this.mirror.ready.size > 0)
        this.mirror.rateWakeAt = rateGrant(rate.limit, tat, now, 1).wakeAt;
    }
    return free;
  }

  /**
   * With a rate limit: how many ready messages may go now (at most one Txn's worth), or 'wait' while the
   * previous charge is in flight; null without a limit. Granting none sets when the next slot comes.
   */
  private rateGrant(free: readonly Consumer[], now: number): { limit: RateLimit; grant: RateGrant } | 'wait' | null {
    const m = this.mirror;
    const limit = m.config.rateLimit;
    // While a charge is in flight the slot it announced still holds.
    if (limit !== null && m.rateInFlight) return 'wait';
    m.rateWakeAt = null;
    if (limit === null || m.ready.size === 0) return null;
    const room = free.reduce((n, c) => n + freeSlots(c), 0);
    const grant = rateGrant(limit, m.rate.tat, now, Math.min(room, RATE_TXN_MESSAGES));
    if (grant.granted === 0) m.rateWakeAt = grant.wakeAt;
    return { limit, grant };
  }

  /** A ready message whose group holds `groupConcurrency` already is parked until the group has room. */
  private parkIfFull(msg: Msg, limit: number | null): boolean {
    const group = msg.record.group;
    if (group === null || !this.mirror.groups.full(group, limit)) return false;
    this.mirror.ready.unfile(msg);
    this.mirror.groups.park(msg, group);
    return true;
  }

  /**
   * A ready message of a group whose groupRateLimit slot has not come (or whose key has a Txn in flight) is
   * parked until it comes, so what follows it in its queue goes meanwhile.
   */
  private parkIfRated(msg: Msg, now: number): boolean {
    const group = msg.record.group;
    if (group === null || this.groupSlot(msg, now)) return false;
    this.mirror.ready.unfile(msg);
    this.mirror.groups.park(msg, group);
    return true;
  }

  /**
   * Whether a message may start now under its group's groupRateLimit (a lost delivery given to another consumer
   * too: a new start, as a claim of an expired lock is elsewhere); if not, the plan looks again at the slot.
   */
  private groupSlot(msg: Msg, now: number): boolean {
    const group = msg.record.group;
    const limit = this.mirror.config.groupRateLimit;
    if (group === null || limit === null || this.mirror.groupRates.free(limit, group, now)) return true;
    this.mirror.groupRates.wait(group);
    return false;
  }

  /** Under groupRateLimit, a delivery of a group's message spends the group's slot: its put goes in `ops`. */
  private chargeGroup(msg: Msg, now: number, ops: changes.Ops): GroupCharge | null {
    const group = msg.record.group;
    const limit = this.mirror.config.groupRateLimit;
    if (group === null || limit === null) return null;
    const charge = this.mirror.groupRates.take(limit, group, now);
    ops.ops.push(charge.op);
    return charge;
  }

  /** A delivery that spent its group's slot: the charge learns the Txn's answer. */
  private charged(charge: GroupCharge | null, change: Planned): Planned {
    return charge === null ? change : firstTold(change, charge);
  }

  /** A delivery counts against its group from planning until its Txn answered (then the record counts). */
  private grouped(msg: Msg, change: Planned): Planned {
    const group = msg.record.group;
    if (group === null) return change;
    const release = this.mirror.groups.reserve(group);
    return firstTold(change, { ok: release, fail: release, error: release });
  }

  /** Plain producers' puts move into the ordered queue; straight to a consumer when one has room and nothing older waits. */
  private planProducers(planned: Planned[], size: number, now: number, paused: boolean): void {
    for (const put of this.mirror.producers.values()) {
      if (put.busy) continue;
      const duplicate = this.mirror.duplicates.get(put.key);
      if (duplicate !== undefined) {
        this.mirror.duplicates.delete(put.key);
        if (duplicate.record.payloadKey === put.key) {
          // The payload of a message that failed as too large: it stays where it is.
          this.mirror.producers.delete(put.key);
          continue;
        }
        const state = stateOf(duplicate.record, now);
        if (state === 'done-awaiting-gc') {
          const ops = changes.revive(this.mirror.keys, put, duplicate.record, duplicate.rev, newIdx(), now);
          planned.push(this.producerChange(put, null, this.noted(ops, { type: 'enqueued', id: put.id, attempt: 0 })));
        } else {
          this.deps.log('warn', `refused ${put.key}: message ${put.id} exists (${state}); ids are unique per queue`);
          planned.push(this.deps.producerChange(put, null, changes.refuse(put)));
        }
        continue;
      }
      if (this.mirror.msgs.has(put.id)) {
        const msg = this.mirror.msgs.get(put.id);
        this.deps.log(
          'warn',
          `refused ${put.key}: message ${put.id} exists (${msg === undefined ? 'queued' : stateOf(msg.record, now)})`,
        );
        planned.push(this.deps.producerChange(put, null, changes.refuse(put)));
        continue;
      }
      if (put.value.length > MAX_PAYLOAD_BYTES) {
        this.deps.log('warn', `${put.key} failed: its ${put.value.length} bytes are over kvmq's limit`);
        const ops = changes.refuseTooLarge(this.mirror.keys, put, now);
        const error = ops.failedError;
        planned.push(
          this.producerChange(put, null, this.noted(ops, { type: 'failed', id: put.id, attempt: 0, error })),
        );
        continue;
      }
      // A large payload moves first and is delivered in a Txn of its own: two copies may not fit one request.
      const consumer =
        !paused &&
        this.mirror.config.rateLimit === null &&
        this.mirror.cursor === null &&
        this.mirror.ready.size === 0 &&
        put.value.length <= MAX_TXN_BYTES / 2 - 65_536
          ? this.choose([...this.mirror.consumers.values()].filter((c) => c.accepts?.('') === true && freeSlots(c) > 0))
          : null;
      const ops = changes.move(this.mirror.keys, put, newIdx(), consumer, size, now);
      const notes: EventNote[] = [{ type: 'enqueued', id: put.id, attempt: 0 }];
      if (consumer !== null) notes.push({ type: 'started', id: put.id, attempt: ops.record?.attempt ?? 1 });
      planned.push(this.producerChange(put, consumer, this.noted(ops, ...notes)));
    }
  }

  /**
   * Answers kvmq consumers once nothing more can be given to them now: a
   * request for room (`ask`), or room given back by finishing (so a claim
   * right after a finish waits for this instead of counting a dry run).
   */
  answers(starving: readonly Consumer[], size: number): void {
    // While a guard failed, what looks like nothing for a consumer may be the refill the mirror has not seen.
    const loadingMore = this.mirror.cursor !== null || this.order.held(Date.now());
    // Messages held back by a rate limit, the queue's or their group's: the first slot.
    const firstSlot = Math.min(this.mirror.rateWakeAt ?? Infinity, this.mirror.groupRates.wakeAt);
    const wakeAt = firstSlot === Infinity ? null : firstSlot;
    for (const consumer of this.mirror.consumers.values()) {
      if ((consumer.reg.ask <= consumer.answered && !consumer.owed) || consumer.reserved > 0) continue;
      const full = freeSlots(consumer) <= 0 || consumer.accepts === null;
      if (!full && loadingMore && starving.includes(consumer)) continue;
      const ask = consumer.reg.ask;
      const previous = consumer.answered;
      consumer.answered = ask;
      this.appetite.answered(consumer);
      consumer.owed = false;
      const ops = changes.answer(this.mirror.keys, consumer, size, wakeAt);
      // On its own: the consumer's lease may have ended, which fails the whole Txn.
      this.deps.kv.txn({ compare: [], success: ops.ops }).catch((error: unknown) => {
        if (consumer.answered === ask && this.mirror.consumers.get(consumer.key) === consumer)
          consumer.answered = previous;
        this.deps.log(
          'warn',
          `answering ${consumer.key} failed: ${error instanceof Error ? error.message : String(error)}`,
        );
      });
    }
  }

  private pick(msg: Msg, exclude: string | null): Consumer | null {
    const cls = msg.record.filterClass;
    return this.choose(
      [...this.mirror.consumers.values()].filter(
        (c) => c.key !== exclude && c.key !== msg.notTo && freeSlots(c) > 0 && c.accepts?.(cls) === true,
      ),
    );
  }

  private choose(candidates: readonly Consumer[]): Consumer | null {
    let best: Consumer | null = null;
    for (const c of candidates) {
      if (best === null) best = c;
      else {
        // Most room first; among equals the one given least recently, then the one that started first.
        const room = freeSlots(c) - freeSlots(best);
        const given = c.lastGiven - best.lastGiven;
        if (room > 0 || (room === 0 && (given < 0 || (given === 0 && startedBefore(c, best))))) best = c;
      }
    }
    return best;
  }
}

function longestWaiting(candidates: readonly Consumer[]): Consumer | null {
  let best: Consumer | null = null;
  for (const c of candidates) if (best === null || c.lastGiven < best.lastGiven) best = c;
  return best;
}

function startedBefore(a: Consumer, b: Consumer): boolean {
  if (a.reg.startedAt !== b.reg.startedAt) return a.reg.startedAt < b.reg.startedAt;
  if (a.reg.seq !== b.reg.seq) return a.reg.seq < b.reg.seq;
  return a.since < b.since;
}
