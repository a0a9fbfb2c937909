/**
 * What a dispatcher holds in memory for its queue: the messages it knows
 * (each mirrors its record, whose mod revision orders every change), the
 * consumers and what each holds, plain producer keys not moved yet, and the
 * ready index: per filter class, pending messages in queue order, plus the
 * backoffs and locks that end later.
 */
import { TimeHeap, SortedQueue } from './heap.js';
import type { MessageRecord } from '../record.js';
import type { Registration } from '../registration.js';

export interface Msg {
  readonly id: string;
  /** Its key in the ordered queue; also its place in the ready index. */
  orderedKey: string;
  record: MessageRecord;
  /** The record's mod revision: the message's version. */
  rev: number;
  /** The payload, when held in memory (within the cache budget). */
  payload: Buffer | null;
  /** Locked: the registration key of the holder, and the delivery key. */
  consumerKey: string | null;
  deliveryKey: string | null;
  /** A consumer whose lock on this message ran out: it is not given the message again. */
  notTo: string | null;
  /** Part of a Txn in flight: planned again only once that Txn has answered. */
  busy: boolean;
  /** A delete of this delivery key seen while busy: an ack to apply once the Txn has answered. */
  ackedKey: string | null;
  /** The payload a plain ack of a requeued message needs (kept at /kvmq/payload/{id}), once read. */
  nextPayload: Buffer | null;
  /** Its current entry in the ready index, if it is ready. */
  entry: ReadyEntry | null;
  /** Failing now, its id is in the dead-letter queue already: it stays failed here. */
  noDeadLetter: boolean;
}

export interface ReadyEntry {
  readonly orderKey: string;
  readonly msg: Msg;
}

export interface Consumer {
  readonly key: string;
  readonly prefix: string;
  reg: Registration;
  lease: string;
  /** The registration's create revision: who registered first. */
  readonly since: number;
  /** Messages whose records say this consumer holds them. */
  readonly held: Set<Msg>;
  /** Deliveries to it in Txns in flight. */
  reserved: number;
  /** Which filter classes it takes; null when it takes nothing (an invalid registration). */
  accepts: ((filterClass: string) => boolean) | null;
  /** The last request (`ask`) answered; an answer in flight counts. */
  answered: number;
  /** A kvmq consumer gave back room (finished): it waits for a delivery or an answer. */
  owed: boolean;
  /** When it was last given a message, to share among equals. */
  lastGiven: number;
}

export function freeSlots(c: Consumer): number {
  return c.reg.capacity - c.held.size - c.reserved;
}

/** A plain producer's put, waiting to be moved into the ordered queue. */
export interface ProducerPut {
  readonly key: string;
  readonly id: string;
  readonly value: Buffer;
  readonly modRevision: number;
  busy: boolean;
}

/** An entry is current while its message is still filed under it (a newer filing leaves older entries stale). */
function isCurrent(e: ReadyEntry): boolean {
  return e.msg.entry === e;
}

/** Pending messages by class in queue order, and those waiting for a backoff to end. */
export class ReadyIndex {
  private readonly byClass = new Map<string, SortedQueue<ReadyEntry>>();
  private readonly later = new TimeHeap<Msg>();
  private readyCount = 0;

  get size(): number {
    return this.readyCount;
  }

  /** Files a pending message as ready (backoff over) or for later. */
  file(msg: Msg, now: number): void {
    this.unfile(msg);
    if (msg.record.phase !== 'pending') return;
    if (msg.record.readyAt > now) {
      this.later.push(msg.record.readyAt, msg);
      return;
    }
    const entry: ReadyEntry = { orderKey: msg.orderedKey, msg };
    msg.entry = entry;
    let queue = this.byClass.get(msg.record.filterClass);
    if (queue === undefined) {
      queue = new SortedQueue();
      this.byClass.set(msg.record.filterClass, queue);
    }
    queue.add(entry);
    this.readyCount += 1;
  }

  unfile(msg: Msg): void {
    if (msg.entry !== null) {
      msg.entry = null;
      this.readyCount -= 1;
    }
  }

  /** Moves messages whose backoff has ended into the ready queues. */
  promote(now: number): void {
    for (let due = this.later.popDue(now); due !== null; due = this.later.popDue(now)) {
      const msg = due.item;
      if (msg.record.phase === 'pending' && msg.record.readyAt === due.time && msg.entry === null) this.file(msg, now);
    }
  }

  nextLater(): number {
    return this.later.peekTime();
  }

  /** The oldest ready message of each class, with its class. */
  heads(): { filterClass: string; msg: Msg }[] {
    const heads: { filterClass: string; msg: Msg }[] = [];
    for (const [filterClass, queue] of this.byClass) {
      const entry = queue.peek(isCurrent);
      if (entry === null) {
        if (queue.length === 0) this.byClass.delete(filterClass);
        continue;
      }
      heads.push({ filterClass, msg: entry.msg });
    }
    return heads;
  }

  /** Drops the entries of messages no longer ready (after many were forgotten at once), keeping the order. */
  prune(): void {
    for (const [filterClass, queue] of this.byClass) {
      queue.replace(queue.values().filter((e) => e.msg.entry === e));
      if (queue.length === 0) this.byClass.delete(filterClass);
    }
  }
}
