/**
 * The zkmq tree, one per kvmq queue, under the URL's chroot:
 *
 *   /_kvmq                                   marker: this chroot is kvmq's
 *   /<queue>                                 marker: a kvmq queue (zkmq's /dir)
 *     /queue                                 pending entries; data: queue-wide dry runs
 *       /<filter class>                      a sub-queue per filter class ('none': no filters), priority 0
 *       /<filter class>~<pppp>               the same for priority pppp (1..1000), see subNode
 *       /<filter class>~<pppp>~lifo          LIFO messages of that class and priority (0..1000), see lifoEntryAt
 *         /<bucket>                          at most BUCKET_SIZE entries each
 *           /<readyAt>-<task>-<seq>          an entry, kept while its task is locked
 *     /tasks/<hash bucket>/<task>            filters/<name>, state, metadata, data, claim, next, report (handlers'
 *                                            progress and log, once they reported; see reports.ts)
 *     /done/<bucket>/<doneAt>-<task>-<seq>   finished tasks in finishing order, for GC
 *     /failed/<bucket>/<failedAt>-<task>-<seq> failed tasks in failing order, for GC and listings
 *     /waiting/<bucket>/<until>-<task>-<seq>  a backoff's end (pending or done), for counts; GC prunes ended ones
 *     /expiry/<bucket>/<expireAt>-<task>-<seq> a time to live's deadline (expireAfterMs), for GC's sweep (expiry.ts)
 *     /parents/<bucket>/<at>-<task>-<seq>    a flow's parent waiting for its children, for counts and listings
 *     /staging/<key>                         a big flow written in stages: /writer (EPHEMERAL), /c<n> the tasks of
 *                                            staged multi n, whose `state` its last multi writes (flow-staging.ts)
 *     /consumers/<id>                        a consumer; /current (ephemeral) what it holds; /canceled-<attempt>-<task>
 *                                            a cancel's note to the holder (cancel-notes.ts)
 *     /conf/task_gc_lifetime, task_gc_interval, filters, failed_lifetime, paused, max_deliveries,
 *           dead_letter_queue; /conf's own data version moves with every configure (claims check it)
 *     /lock                                  data: last GC time; /lock/gc (ephemeral) while a GC runs
 *     /events/e<n>_<seq>                     a multi's n queue events (while conf/events is true), see events.ts;
 *                                            data: {"trimmedTo": n}, below which events may have been trimmed
 *     /turns/<name>                          data: when the turn was last taken (ms), see turns.ts
 *     /debounce/<debounce id>                data: the id of the message that debounce id last added, see debounce.ts
 *     /groups/<group>/<task>                 EPHEMERAL: a held message of the group (groupConcurrency), see groups.ts
 *     /rate                                  data: the rate limit's GCRA tat (ms), see rate.ts
 *     /group-rates/<group>                   data: when the group's next message may start (ms), see group-rates.ts
 *     /schedules/<name>                      data: {"body","nextAt"}, see schedules.ts
 */
import { StoreLayoutError } from '../../model/errors.js';
import type { AttemptRecord, MessageState, Outcome } from '../../model/types.js';
import type { PayloadEncoding } from '../../model/payload.js';
import { DEFAULT_PRIORITY, priorityKey } from '../../model/scheduling.js';

export const ROOT_MARKER_NAME = '_kvmq';
export const ROOT_MARKER = JSON.stringify({ kvmq: 'zookeeper', layout: 1 });
export const QUEUE_MARKER = JSON.stringify({ kvmq: 'queue', layout: 1 });

/** Entries per bucket: a listing of 2,000 names of up to 290 bytes stays far below jute.maxbuffer (1 MiB). */
export const BUCKET_SIZE = 2000;
/** Tasks spread over 4,096 buckets by a hash of their id, so status and dedupe find a task in one read. */
const TASK_BUCKETS = 4096;
export const NO_FILTERS = 'none';

export class QueuePaths {
  readonly dir: string;
  readonly queue: string;
  readonly tasks: string;
  readonly done: string;
  readonly failed: string;
  readonly waiting: string;
  readonly expiry: string;
  readonly parents: string;
  readonly consumers: string;
  readonly conf: string;
  readonly lock: string;
  readonly gcLock: string;
  readonly events: string;
  readonly turns: string;
  readonly debounce: string;
  readonly groups: string;
  readonly rate: string;
  readonly groupRates: string;
  readonly schedules: string;

  constructor(readonly name: string) {
    this.dir = `/${name}`;
    this.queue = `${this.dir}/queue`;
    this.tasks = `${this.dir}/tasks`;
    this.done = `${this.dir}/done`;
    this.failed = `${this.dir}/failed`;
    this.waiting = `${this.dir}/waiting`;
    this.expiry = `${this.dir}/expiry`;
    this.parents = `${this.dir}/parents`;
    this.consumers = `${this.dir}/consumers`;
    this.conf = `${this.dir}/conf`;
    this.lock = `${this.dir}/lock`;
    this.gcLock = `${this.lock}/gc`;
    this.events = `${this.dir}/events`;
    this.turns = `${this.dir}/turns`;
    this.debounce = `${this.dir}/debounce`;
    this.groups = `${this.dir}/groups`;
    this.rate = `${this.dir}/rate`;
    this.groupRates = `${this.dir}/group-rates`;
    this.schedules = `${this.dir}/schedules`;
  }

  /** The nodes a new queue starts with, parents first. */
  skeleton(): { path: string; data: string }[] {
    return [
      { path: this.dir, data: QUEUE_MARKER },
      { path: this.queue, data: JSON.stringify({ dryRuns: 0, eoqUntil: 0 }) },
      // The sub-queue of messages without filters, ready for the first enqueue.
      { path: `${this.queue}/${NO_FILTERS}`, data: '' },
      { path: `${this.queue}/${NO_FILTERS}/${bucketName(0)}`, data: '' },
      { path: this.tasks, data: '' },
      { path: this.done, data: '' },
      { path: this.failed, data: '' },
      { path: this.waiting, data: '' },
      { path: this.expiry, data: '' },
      { path: this.parents, data: '' },
      { path: this.consumers, data: '' },
      { path: this.conf, data: '' },
      { path: this.lock, data: JSON.stringify({ gcAt: 0 }) },
      { path: this.events, data: JSON.stringify({ trimmedTo: 0 }) },
      { path: this.turns, data: '' },
      { path: this.debounce, data: '' },
      { path: this.groups, data: '' },
      { path: this.rate, data: '0' },
      { path: this.groupRates, data: '' },
      { path: this.schedules, data: '' },
    ];
  }

  /** The sub-queue of a filter class and priority (see subNode). */
  classDir(filterClass: string, priority: number, lifo = false): string {
    return `${this.queue}/${subNode(filterClass, priority, lifo)}`;
  }

  taskBucket(id: string): string {
    return `${this.tasks}/${taskBucketOf(id)}`;
  }

  task(id: string): string {
    return `${this.taskBucket(id)}/${id}`;
  }

  consumer(id: string): string {
    return `${this.consumers}/${consumerNode(id)}`;
  }

  current(id: string): string {
    return `${this.consumer(id)}/current`;
  }
}

/** A consumer id as a node name: only '/' (and the escape '%') need escaping. */
export function consumerNode(id: string): string {
  return id.replaceAll('%', '%25').replaceAll('/', '%2F');
}

export function consumerOfNode(node: string): string {
  return node.replaceAll('%2F', '/').replaceAll('%25', '%');
}

/** Nodes of one task. */
export function taskNodes(taskPath: string): {
  filters: string;
  state: string;
  metadata: string;
  data: string;
  claim: string;
  next: string;
  report: string;
} {
  return {
    filters: `${taskPath}/filters`,
    state: `${taskPath}/state`,
    metadata: `${taskPath}/metadata`,
    data: `${taskPath}/data`,
    claim: `${taskPath}/claim`,
    next: `${taskPath}/next`,
    report: `${taskPath}/report`,
  };
}

/** A filter class as a node name: the class itself ('a=x&b=y'), or 'none'. */
export function classNode(filterClass: string): string {
  return filterClass === '' ? NO_FILTERS : filterClass;
}

export function classOfNode(node: string): string {
  return node === NO_FILTERS ? '' : node;
}

/** Separates a sub-queue's filter class from its priority: never in a class ('=', '&' and filter tokens). */
const PRIORITY_MARK = '~';

/**
 * A sub-queue's node name: the class node for priority 0 (the default, so plain messages keep the layout and
 * cost they always had), `<class node>~<4-digit priority>` for others: 'none~0005', 'a=x~0100'.
 */
export function subNode(filterClass: string, priority: number, lifo = false): string {
  const node = classNode(filterClass);
  if (lifo) return `${node}${PRIORITY_MARK}${priorityKey(priority)}${LIFO_SUFFIX}`;
  return priority === DEFAULT_PRIORITY ? node : `${node}${PRIORITY_MARK}${priorityKey(priority)}`;
}

/** The end of a LIFO sub-queue's name: 'none~0000~lifo'. */
const LIFO_SUFFIX = `${PRIORITY_MARK}lifo`;
/** A LIFO entry's time is this minus when it was enqueued (see lifoEntryAt). */
const LIFO_AT_BASE = 3_000_000_000_000;
/** Times below this (before 2017) are LIFO entries' (until 2047, when LIFO_AT_BASE − now passes it). */
const LIFO_AT_BELOW = 1_500_000_000_000;

/**
 * The ready time a LIFO message's entry and state carry: LIFO_AT_BASE − now, long past, so it is ready and
 * sorts before every FIFO entry of its priority, a later one before an earlier one (equal times: the higher
 * sequence first, compareEntries). LIFO entries have sub-queues of their own, whose buckets a claim walks from
 * the newest, so a backlog of FIFO entries is never read to find them.
 */
export function lifoEntryAt(now: number): number {
  return LIFO_AT_BASE - now;
}

/** Whether an entry's time is a LIFO entry's (lifoEntryAt). */
export function isLifoAt(at: number): boolean {
  return at < LIFO_AT_BELOW;
}

/** A sub-queue as named by its node. */
export interface SubKey {
  readonly node: string;
  readonly filterClass: string;
  readonly priority: number;
  /** Its entries are LIFO messages'. */
  readonly lifo: boolean;
}

export function parseSubNode(node: string): SubKey {
  const lifo = node.endsWith(LIFO_SUFFIX);
  const name = lifo ? node.slice(0, -LIFO_SUFFIX.length) : node;
  const mark = name.lastIndexOf(PRIORITY_MARK);
  if (mark < 0) return { node, filterClass: classOfNode(name), priority: DEFAULT_PRIORITY, lifo };
  return { node, filterClass: classOfNode(name.slice(0, mark)), priority: Number(name.slice(mark + 1)), lifo };
}

function taskBucketOf(id: string): string {
  // FNV-1a: cheap, stable across processes and versions.
  let hash = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) {
    hash ^= id.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return ((hash >>> 0) % TASK_BUCKETS).toString(16).padStart(3, '0');
}

export function bucketName(n: number): string {
  return n.toString().padStart(10, '0');
}

/** The prefix of an entry; ZooKeeper appends a 10-digit sequence number. */
export function entryPrefix(at: number, id: string): string {
  return `${at.toString().padStart(13, '0')}-${id}-`;
}

export interface Entry {
  /** Full path. */
  readonly path: string;
  readonly bucket: string;
  readonly name: string;
  /** readyAt for queue entries, doneAt for done entries. */
  readonly at: number;
  readonly id: string;
  readonly seq: number;
}

export function parseEntry(bucketPath: string, bucket: string, name: string): Entry | null {
  if (name.length < 13 + 1 + 1 + 1 + 10) return null;
  const at = Number(name.slice(0, 13));
  const seq = Number(name.slice(-10));
  const id = name.slice(14, -11);
  if (!Number.isFinite(at) || !Number.isFinite(seq) || id === '') return null;
  return { path: `${bucketPath}/${name}`, bucket, name, at, id, seq };
}

/** True when `entry` is the one created from `prefix` (ZooKeeper appended its 10-digit sequence). */
export function namesEntry(prefix: string | null, entry: Pick<Entry, 'path'>): boolean {
  return prefix !== null && entry.path.length === prefix.length + 10 && entry.path.startsWith(prefix);
}

/** Oldest first; LIFO entries of one time newest first. */
export function compareEntries(a: Entry, b: Entry): number {
  const order = a.bucket.localeCompare(b.bucket) || a.seq - b.seq;
  return a.at - b.at || (isLifoAt(a.at) ? -order : order);
}

/** `waiting`: a flow's parent waiting for its children (flow-state.ts), with no entry in a sub-queue. */
export type Phase = 'pending' | 'locked' | 'done' | 'failed' | 'waiting';

/**
 * The `state` node: the state enum as of the last write (what a plain client
 * reads), and the times and counters kvmq derives the current state from.
 */
export interface TaskState {
  readonly state: MessageState;
  readonly phase: Phase;
  readonly readyAt: number;
  readonly lockUntil: number;
  readonly consumer: string | null;
  readonly backoffUntil: number;
  /** Locked: queue again after this run; pending: a requeue waiting for its backoff. */
  readonly requeue: boolean;
  /** A replacement payload waits in `next` for the requeued run. */
  readonly nextEncoding: PayloadEncoding | null;
  readonly attempt: number;
  readonly outcome: Outcome | null;
  readonly lastError: string | null;
  readonly enqueuedAt: number;
  readonly updatedAt: number;
  readonly encoding: PayloadEncoding;
  readonly filterClass: string;
  /** The queue entry (pending and locked), the `/parents` entry (waiting), or null. */
  readonly entry: string | null;
  /** The done entry (done) or failed entry (failed), or null. */
  readonly done: string | null;
  /** The message's own policy, encoded; absent for none. */
  readonly policy?: string;
  /** Its priority (the sub-queue it is in); absent for 0. */
  readonly priority?: number;
  /** Its group; absent for none. */
  readonly group?: string;
  /** The debounce id it was added with; absent for none. */
  readonly debounce?: string;
  /** Locked with a held node in `/groups/<group>` (made by its claim, removed with its claim); else absent. */
  readonly grouped?: boolean;
  /** Deliveries whose lock was lost since the last retry, revive or requeued run; absent for none. */
  readonly losses?: number;
  /** Attempts that did not end in a plain success, newest last; absent for none. */
  readonly history?: readonly AttemptRecord[];
  /** Done: what its run's success returned (model/result.ts ResultInRecord); absent for none. */
  readonly result?: string;
  readonly resultEncoding?: 'bytes';
  /** A flow's parent: its children as [queue, id], in the order written; absent for none. */
  readonly children?: readonly (readonly [string, string])[];
  /** A waiting parent (phase `waiting`): its children that have not ended yet. */
  readonly childrenLeft?: number;
  /** A flow's child: its parent as [queue, id]; absent for none. */
  readonly parent?: readonly [string, string];
  /** A flow's child that has not ended yet: it owes its parent one count (flow-ends.ts); absent once paid. */
  readonly owes?: true;
  /** A flow's child: what its final failure does to its parent, when not `fail`. */
  readonly onChildFailure?: 'ignore' | 'remove';
  /**
   * False when `metadata` holds `{}`, so a claim need not read it. Missing in
   * states older kvmq wrote: then it is read.
   */
  readonly hasMetadata?: boolean;
}

export type StateFields = Omit<TaskState, 'state'>;

/** A state to write: the enum field is computed from the rest. */
export function makeState(fields: StateFields & { state?: MessageState }, now: number): TaskState {
  return { ...fields, state: deriveState(fields, true, now) };
}

/**
 * The state now. `claimed`: the task's ephemeral claim exists (a lock whose
 * owner's session died is free at once).
 */
export function deriveState(s: StateFields, claimed: boolean, now: number): MessageState {
  switch (s.phase) {
    case 'pending':
      if (s.readyAt <= now) return 'queued';
      return s.requeue ? 'done-with-requeue' : 'queued-with-backoff';
    case 'locked':
      if (s.lockUntil <= now || !claimed) return 'queued';
      return s.requeue ? 'locked-with-requeue' : 'locked';
    case 'done':
      return s.backoffUntil > now ? 'done-with-backoff' : 'done-awaiting-gc';
    case 'failed':
      return 'failed';
    case 'waiting':
      return 'waiting-children';
  }
}

/** When the current state ends by itself, or null. */
export function stateEndsAt(s: TaskState, claimed: boolean, now: number): number | null {
  if (s.phase === 'failed' || s.phase === 'waiting') return null;
  const at = s.phase === 'pending' ? s.readyAt : s.phase === 'locked' ? (claimed ? s.lockUntil : 0) : s.backoffUntil;
  return at > now ? at : null;
}

export function encodeState(state: TaskState): Buffer {
  return Buffer.from(JSON.stringify(state));
}

export function decodeState(path: string, data: Buffer): TaskState {
  try {
    const parsed = JSON.parse(data.toString('utf8')) as TaskState;
    if (typeof parsed.phase === 'string' && typeof parsed.attempt === 'number') return parsed;
  } catch {
    // reported below
  }
  throw new StoreLayoutError(`${path} does not hold a kvmq task state; is something else writing under this dir?`);
}

/** A task's priority: the sub-queue its entry is in. */
export function priorityOf(s: Pick<TaskState, 'priority'>): number {
  return s.priority ?? DEFAULT_PRIORITY;
}
