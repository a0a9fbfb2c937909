/**
 * The etcds key protocol (docs/etcd.md, its key table) and kvmq's extra keys, for one queue.
 * Long form `/queue/{q}/...` and short form `/q/{q}/...` are the same queue;
 * within either, `producer|p`, `input|i` and `consumer|c` are both accepted.
 * kvmq writes the long form. Everything kvmq adds lives under
 * `/queue/{q}/kvmq/`, a segment no protocol key uses.
 */
import { PRIORITY_DIGITS, priorityKey } from '../../model/scheduling.js';

/** What a key under a queue's prefixes is. */
export type ParsedKey =
  | { readonly kind: 'producer'; readonly id: string }
  | { readonly kind: 'ordered'; readonly idx: string; readonly id: string }
  | { readonly kind: 'registration'; readonly consumerKey: string; readonly consumer: string }
  | {
      readonly kind: 'delivery';
      readonly consumerKey: string;
      readonly consumer: string;
      readonly idx: string;
      readonly id: string;
    }
  | { readonly kind: 'answer'; readonly consumerKey: string }
  | { readonly kind: 'record'; readonly id: string }
  | { readonly kind: 'kvmq' }
  | { readonly kind: 'election' }
  | { readonly kind: 'foreign'; readonly why: string };

/** The largest payload a message may have: with its record it fits one etcd request (1.5 MiB by default). */
export const MAX_PAYLOAD_BYTES = 1024 * 1024;

const MESSAGE_ID = /^[A-Za-z0-9_.:@+=-]{1,256}$/;
const CONSUMER_ID = /^[^/\s]{1,256}$/;
const IDX = /^\d{1,32}$/;
export const IDX_DIGITS = 19;

const PRODUCER = new Set(['producer', 'p']);
const INPUT = new Set(['input', 'i']);
const CONSUMER = new Set(['consumer', 'c']);

export function isMessageId(id: string): boolean {
  return MESSAGE_ID.test(id);
}

export class QueueKeys {
  /** `/queue/{q}`: the dispatcher's election key (value: its node id). */
  readonly election: string;
  /** `/queue/{q}/` */
  readonly prefix: string;
  /** `/q/{q}/` */
  readonly shortPrefix: string;
  /** Range of the ordered queue: `/queue/{q}/0` up to `/queue/{q}/:` (idx are digits). */
  readonly orderedStart: string;
  readonly orderedEnd: string;
  readonly producers: string;
  readonly shortProducers: string;
  readonly consumers: string;
  readonly shortConsumers: string;
  readonly records: string;
  readonly payloads: string;
  /** Handlers' reports: `/kvmq/report/{id}`, value JSON `{"progress", "log", "dropped"}` (reports.ts). */
  readonly reports: string;
  readonly doneIndex: string;
  /** Failed messages by failure time: `/kvmq/failed/{failedAt:13}/{id}`. */
  readonly failedIndex: string;
  /** Pending messages in a backoff, by its end: `/kvmq/backoff/{readyAt:13}/{id}` (value `r`: a requeue). */
  readonly backoffIndex: string;
  /** Finished messages refusing duplicates, by the end of that: `/kvmq/refuse/{backoffUntil:13}/{id}`. */
  readonly refuseIndex: string;
  /** Pending messages never delivered with a time to live, by its deadline: `/kvmq/expiry/{expireAt:13}/{id}`. */
  readonly expiryIndex: string;
  /** Failed messages whose payload stayed at a plain producer's key: `/kvmq/stuck/{id}`. */
  readonly stuckIndex: string;
  /** Flow parents waiting for their children, by enqueue time: `/kvmq/waiting/{enqueuedAt:13}/{id}`. */
  readonly waitingIndex: string;
  /** Flow children not ended yet: `/kvmq/owes/{id}`, value JSON `[parentQueue, parentId, policy]` (for clear). */
  readonly owesIndex: string;
  /**
   * Flow children that ended in a dispatcher's Txn (a lost delivery failed at maxDeliveries, a plain ack), not yet
   * counted for their parent: `/kvmq/unsettled/{id}`, value as an owes entry's; GC counts them (flow-ends.ts).
   */
  readonly unsettledIndex: string;
  /** Staged flow messages: `/kvmq/staged/{flow}/{id}`, value: the flow's root queue (flow-staging.ts). */
  readonly stagedIndex: string;
  /** A flow being staged, on its writer's lease: `/kvmq/staging/{flow}` (in its root's queue). */
  readonly stagings: string;
  /** A staged flow made live, until every message is moved in: `/kvmq/flows/{flow}` (in its root's queue). */
  readonly liveFlows: string;
  /** Queue events, one key each: `/kvmq/ev/{at:13}/{writer}{seq}` (queue-events.ts); read by mod revision. */
  readonly events: string;
  /** The highest mod revision of an event trimmed so far (decimal), for `missed`. */
  readonly eventsTrimmed: string;
  /** The waiting message of each debounce id: `/kvmq/debounce/{debounceId}`, value: its message id. */
  readonly debounceIndex: string;
  /** Schedules: `/kvmq/sched/{name}`, value `{"body", "nextAt"}` (schedules.ts). */
  readonly schedules: string;
  /** Turns taken (takeTurn): `/kvmq/turn/{name}`, value: when, on the taker's clock. */
  readonly turns: string;
  /** This queue's entry in the root's queue registry (see queueRegistry). */
  readonly registry: string;
  readonly config: string;
  /** The rate limit's state: the GCRA `tat` (model/rate-limit.ts), written by the dispatcher with its deliveries. */
  readonly rate: string;
  /** groupRateLimit's state: `/kvmq/grate/{group}`, the group's next start time (group-rates.ts). */
  readonly groupRates: string;
  readonly eoq: string;
  readonly gcLock: string;

  constructor(
    readonly root: string,
    readonly queue: string,
  ) {
    const long = `${root}/queue/${queue}`;
    this.election = long;
    this.prefix = `${long}/`;
    this.shortPrefix = `${root}/q/${queue}/`;
    this.orderedStart = `${long}/0`;
    this.orderedEnd = `${long}/:`;
    this.producers = `${long}/producer/`;
    this.shortProducers = `${this.shortPrefix}p/`;
    this.consumers = `${long}/consumer/`;
    this.shortConsumers = `${this.shortPrefix}c/`;
    this.records = `${long}/kvmq/msg/`;
    this.payloads = `${long}/kvmq/payload/`;
    this.reports = `${long}/kvmq/report/`;
    this.doneIndex = `${long}/kvmq/done/`;
    this.failedIndex = `${long}/kvmq/failed/`;
    this.backoffIndex = `${long}/kvmq/backoff/`;
    this.refuseIndex = `${long}/kvmq/refuse/`;
    this.expiryIndex = `${long}/kvmq/expiry/`;
    this.stuckIndex = `${long}/kvmq/stuck/`;
    this.waitingIndex = `${long}/kvmq/waiting/`;
    this.owesIndex = `${long}/kvmq/owes/`;
    this.stagedIndex = `${long}/kvmq/staged/`;
    this.unsettledIndex = `${long}/kvmq/unsettled/`;
    this.stagings = `${long}/kvmq/staging/`;
    this.liveFlows = `${long}/kvmq/flows/`;
    this.events = `${long}/kvmq/ev/`;
    this.eventsTrimmed = `${long}/kvmq/evtrim`;
    this.turns = `${long}/kvmq/turn/`;
    this.debounceIndex = `${long}/kvmq/debounce/`;
    this.schedules = `${long}/kvmq/sched/`;
    this.registry = queueRegistry(root) + queue;
    this.config = `${long}/kvmq/config`;
    this.eoq = `${long}/kvmq/eoq`;
    this.rate = `${long}/kvmq/rate`;
    this.groupRates = `${long}/kvmq/grate/`;
    this.gcLock = `${long}/kvmq/gc`;
  }

  producer(id: string): string {
    return this.producers + id;
  }

  ordered(idx: string, id: string): string {
    return `${this.prefix}${idx}/${id}`;
  }

  /** The registration key of a consumer kvmq registers (long form). */
  consumer(consumer: string): string {
    return this.consumers + consumer;
  }

  /** A delivery under a consumer's registration key, whichever form it registered in. */
  delivery(consumerKey: string, idx: string, id: string): string {
    return `${consumerKey}/${idx}/${id}`;
  }

  /** The dispatcher's answer to a kvmq consumer's request (see docs/etcd.md). */
  answer(consumerKey: string): string {
    return `${consumerKey}/answer`;
  }

  record(id: string): string {
    return this.records + id;
  }

  report(id: string): string {
    return this.reports + id;
  }

  payload(id: string): string {
    return this.payloads + id;
  }

  /** GC index of finished messages, by finish time, so GC reads only what expired. */
  done(updatedAt: number, id: string): string {
    return `${this.doneIndex}${String(Math.max(0, Math.floor(updatedAt))).padStart(13, '0')}/${id}`;
  }

  doneBefore(time: number): string {
    return timeKey(this.doneIndex, time);
  }

  failed(failedAt: number, id: string): string {
    return `${timeKey(this.failedIndex, failedAt)}/${id}`;
  }

  expiry(expireAt: number, id: string): string {
    return `${timeKey(this.expiryIndex, expireAt)}/${id}`;
  }

  backoff(readyAt: number, id: string): string {
    return `${timeKey(this.backoffIndex, readyAt)}/${id}`;
  }

  refuse(until: number, id: string): string {
    return `${timeKey(this.refuseIndex, until)}/${id}`;
  }

  debounce(debounceId: string): string {
    return this.debounceIndex + debounceId;
  }

  schedule(name: string): string {
    return this.schedules + name;
  }

  turn(name: string): string {
    return this.turns + name;
  }

  stuck(id: string): string {
    return this.stuckIndex + id;
  }

  waiting(enqueuedAt: number, id: string): string {
    return `${timeKey(this.waitingIndex, enqueuedAt)}/${id}`;
  }

  owes(id: string): string {
    return this.owesIndex + id;
  }

  unsettled(id: string): string {
    return this.unsettledIndex + id;
  }

  staged(flow: string, id: string): string {
    return `${this.stagedIndex}${flow}/${id}`;
  }

  /** Classifies a key of this queue (either form). */
  parse(key: string): ParsedKey {
    if (key === this.election) return { kind: 'election' };
    let rest: string;
    let base: string;
    let long: boolean;
    if (key.startsWith(this.prefix)) {
      rest = key.slice(this.prefix.length);
      base = this.prefix;
      long = true;
    } else if (key.startsWith(this.shortPrefix)) {
      rest = key.slice(this.shortPrefix.length);
      base = this.shortPrefix;
      long = false;
    } else {
      return { kind: 'foreign', why: 'not under this queue' };
    }
    const parts = rest.split('/');
    const [head = '', second, third, fourth] = parts;
    if (PRODUCER.has(head)) {
      if (parts.length !== 2 || second === undefined || second === '')
        return { kind: 'foreign', why: 'a producer key needs exactly one name after producer/' };
      if (!isMessageId(second))
        return {
          kind: 'foreign',
          why: `producer key name '${second}' is not a valid message id (1-256 of A-Z a-z 0-9 _ . : @ + = -)`,
        };
      return { kind: 'producer', id: second };
    }
    if (INPUT.has(head)) {
      if (parts.length !== 3 || third === undefined || third === '')
        return { kind: 'foreign', why: 'an input key is input/{client}/{key}' };
      if (!isMessageId(third)) return { kind: 'foreign', why: `input key name '${third}' is not a valid message id` };
      return { kind: 'producer', id: third };
    }
    if (CONSUMER.has(head)) {
      if (second === undefined || !CONSUMER_ID.test(second))
        return { kind: 'foreign', why: 'a consumer key is consumer/{client}' };
      const consumerKey = `${base}${head}/${second}`;
      if (parts.length === 2) return { kind: 'registration', consumerKey, consumer: second };
      if (parts.length === 3 && third === 'answer') return { kind: 'answer', consumerKey };
      if (parts.length === 4 && third !== undefined && IDX.test(third) && fourth !== undefined && isMessageId(fourth)) {
        return { kind: 'delivery', consumerKey, consumer: second, idx: third, id: fourth };
      }
      return { kind: 'foreign', why: 'under a consumer only {idx}/{key} deliveries exist' };
    }
    if (long && head === 'kvmq') {
      if (second === 'msg' && parts.length === 3 && third !== undefined && isMessageId(third))
        return { kind: 'record', id: third };
      return { kind: 'kvmq' };
    }
    if (long && IDX.test(head) && parts.length === 2 && second !== undefined && isMessageId(second)) {
      return { kind: 'ordered', idx: head, id: second };
    }
    return { kind: 'foreign', why: 'not a key of the queue protocol' };
  }
}

/**
 * The registry of queues, `/queue/.kvmq/queues/{q}` (empty values): written when a queue is configured,
 * gets its first message from this process, or a dispatcher takes it over, so `queues()` reads one short
 * range. `.kvmq` is no queue name (names start with a letter or digit), so no queue's keys are mistaken for it.
 */
export function queueRegistry(root: string): string {
  return `${root}/queue/.kvmq/queues/`;
}

/** `{index}{time:13}`: the start of a time-ordered index's entries at `time`. */
export function timeKey(index: string, time: number): string {
  return `${index}${String(Math.max(0, Math.min(9_999_999_999_999, Math.floor(time)))).padStart(13, '0')}`;
}

/** The id and time of a time-ordered index entry `{index}{time:13}/{id}`. */
export function parseTimeKey(index: string, key: string): { time: number; id: string } {
  return { time: Number(key.slice(index.length, index.length + 13)), id: key.slice(index.length + 14) };
}

let lastMs = 0;
let sequence = 0;

/**
 * A position in the ordered queue: 13 digits of milliseconds and 6 of a
 * per-process sequence, so keys sort in the order one process made them and
 * roughly in time across processes. Keys stay unique by their message id.
 * A message with a priority above 0 gets `9{priority:4}` in front (24 digits):
 * the ordered queue then sorts by priority, then by time, and a priority-0
 * idx (every timestamp before the year 2255 starts below 9) is as before.
 */
export function newIdx(priority = 0): string {
  const now = Date.now();
  if (now > lastMs) {
    lastMs = now;
    sequence = 0;
  } else if (++sequence > 999_999) {
    lastMs += 1;
    sequence = 0;
  }
  const idx = `${String(lastMs).padStart(13, '0')}${String(sequence).padStart(6, '0')}`;
  return priority === 0 ? idx : priorityBand(priority) + idx;
}

let lifoMs = 0;
let lifoSequence = 0;
const LIFO_SEQUENCE_MAX = 99_999;
const MS_COMPLEMENT = 9_999_999_999_999;
// The first digit of a LIFO idx (after its priority band): below every timestamp's.
const LIFO_MARK = '0';

/**
 * The idx of a LIFO message: `0`, then 13 digits of (9999999999999 − ms) and 5 of (99999 − a per-process
 * sequence), with the priority band in front as newIdx puts it. It sorts before every idx of newIdx in its
 * priority (their timestamps start above 0), and a later one before an earlier one: the dispatcher takes the
 * ordered queue in key order, so the newest LIFO message goes first. As many digits as newIdx's, so the loader
 * reads it as any idx (its time runs backwards, which the loader's windows need not know).
 */
export function newLifoIdx(priority = 0): string {
  const now = Date.now();
  if (now > lifoMs) {
    lifoMs = now;
    lifoSequence = 0;
  } else if (++lifoSequence > LIFO_SEQUENCE_MAX) {
    lifoMs += 1;
    lifoSequence = 0;
  }
  const idx = `${LIFO_MARK}${String(MS_COMPLEMENT - lifoMs).padStart(13, '0')}${String(LIFO_SEQUENCE_MAX - lifoSequence).padStart(5, '0')}`;
  return priority === 0 ? idx : priorityBand(priority) + idx;
}

/** The mark in front of the idx of a message with a priority above 0. */
export const PRIORITY_MARK = '9';
const PRIORITY_IDX_DIGITS = IDX_DIGITS + 1 + PRIORITY_DIGITS;

/** The idx prefix shared by the messages of one priority above 0: `9{priority:4}`. */
export function priorityBand(priority: number): string {
  return PRIORITY_MARK + priorityKey(priority);
}

/** The priority an idx was made with (0 for a 19-digit or foreign idx). */
export function idxPriority(idx: string): number {
  return idx.length === PRIORITY_IDX_DIGITS && idx.startsWith(PRIORITY_MARK)
    ? Number(idx.slice(1, 1 + PRIORITY_DIGITS))
    : 0;
}

/** The idx at the start of millisecond `ms` within a priority's band, for ranges of the ordered queue by time. */
export function idxAt(ms: number, priority = 0): string {
  const idx = `${String(Math.max(0, Math.floor(ms))).padStart(13, '0')}000000`;
  return priority === 0 ? idx : priorityBand(priority) + idx;
}

/**
 * The millisecond an idx was made in (for kvmq's own idx format, with or without a priority); 0 for a LIFO
 * idx (newLifoIdx), whose digits count time backwards.
 */
export function idxMs(idx: string): number {
  if (idx.length === IDX_DIGITS) return idx.startsWith(LIFO_MARK) ? 0 : Number(idx.slice(0, 13));
  if (idxPriority(idx) > 0) {
    const rest = idx.slice(1 + PRIORITY_DIGITS);
    return rest.startsWith(LIFO_MARK) ? 0 : Number(rest.slice(0, 13));
  }
  return 0;
}

/**
 * The idx of the same place in another priority's band: its time (or LIFO) digits kept, so a message whose priority
 * changes keeps its place among the new priority's messages by when it was enqueued. A foreign idx gets a new one.
 */
export function idxWithPriority(idx: string, priority: number): string {
  const base = idxPriority(idx) > 0 ? idx.slice(1 + PRIORITY_DIGITS) : idx;
  if (base.length !== IDX_DIGITS) return newIdx(priority);
  return priority === 0 ? base : priorityBand(priority) + base;
}

/**
 * For a LIFO idx, the idx prefix where its priority's LIFO keys end and its FIFO keys start (all of that
 * priority's LIFO keys are read as one range, however far apart their digits); null for any other idx.
 */
export function lifoEnd(idx: string): string | null {
  if (idx.length === IDX_DIGITS) return idx.startsWith(LIFO_MARK) ? '1' : null;
  if (idxPriority(idx) === 0) return null;
  const band = idx.slice(0, 1 + PRIORITY_DIGITS);
  return idx.startsWith(LIFO_MARK, band.length) ? `${band}1` : null;
}
