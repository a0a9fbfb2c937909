/**
 * A queue's Redis keys. With prefix `carmine:mq` the names are the Carmine
 * seed's, `carmine:mq:<qname>:messages` and so on, except that the queue name
 * is wrapped in braces: `carmine:mq:{orders}:messages`. The braces are a Redis
 * Cluster hash tag, so every key of a queue hashes to one slot and each Lua
 * script touches a single slot.
 */

/**
 * Every key of a queue, by name, with the type it must hold. The Lua scripts' type checks read it too:
 * script-sources.ts writes it into their table when it composes them.
 */
export const KEY_TYPES = {
  // Carmine's keys.
  messages: 'hash', // id → encoding tag + payload
  locks: 'hash', // id → lock expiry (ms)
  backoffs: 'hash', // id → backoff expiry (ms)
  nattempts: 'hash', // id → attempts so far
  'mid-circle': 'list', // ready ids without filters, next on the right
  done: 'set', // finished ids
  requeue: 'set', // ids to queue again (allowRequeue)
  'eoq-backoff?': 'string', // queue-wide end-of-queue backoff, a flag with a TTL
  'ndry-runs': 'string', // dry runs in a row
  // Added by kvmq.
  metadata: 'hash', // id → metadata JSON (only when not {})
  filters: 'hash', // id → filter class (only when it has filters)
  classes: 'set', // filter classes seen; each has a ready list `mid-circle:<class>`
  holders: 'hash', // id → '<consumer> <attempt> <claimed at ms>' (older kvmq: the consumer alone)
  outcomes: 'hash', // id → last outcome (and a newline and the error); absent for a done message that succeeded
  results: 'hash', // id → encoding tag + the result its run's success returned (only when it returned one)
  'enqueued-at': 'hash', // id → ms
  'updated-at': 'hash', // id → ms (absent: enqueued-at; claims and finishes to done write holders, done-at)
  'requeue-content': 'hash', // id → the payload a requeued run carries (replacePayload)
  policies: 'hash', // id → the message's own retry policy JSON (only when it has one)
  history: 'hash', // id → JSON array of attempt records (only once there is one)
  losses: 'hash', // id → lost locks in this run (only once one was lost)
  pushes: 'hash', // filter class → ids ever pushed at the back of its ready list (list cursors)
  schedule: 'zset', // pending ids waiting for a backoff, by its end
  'lock-expiry': 'zset', // locked ids, by lock end
  'requeue-locks': 'zset', // locked ids marked for requeue, by lock end (counts and lists)
  'requeue-schedule': 'zset', // done ids marked for requeue, by the end of their backoff
  'done-at': 'zset', // finished ids, by finish time (GC)
  dedupe: 'zset', // successes with a backoff (not marked for requeue), by its end (older kvmq: all, by finish time)
  failed: 'zset', // failed ids, by failure time
  expiry: 'zset', // ids enqueued with a time to live, by its deadline; dropped when due (gc-expire.lua)
  conf: 'hash', // configuration: task_gc_lifetime, task_gc_interval, failed_lifetime (ms), filter_enums (JSON),
  // paused ('1'), max_deliveries, dead_letter_queue, events ('1'), events_max_count, events_max_age
  consumers: 'hash', // consumer id → JSON registration
  'gc-lock': 'string', // one GC at a time, with a TTL
  'gc-at': 'string', // when the last GC started (ms)
  wake: 'channel', // pub/sub channel: messages may be ready
  events: 'stream', // queue events: one entry per script call, its id the number of its last event
  'events-seq': 'string', // events ever written: the number of the newest (never reset, so cursors stay ordered)
  'events-wake': 'channel', // pub/sub channel: events were written
  // Scheduling (issue 13).
  priorities: 'hash', // id → priority (only when above 0)
  lanes: 'zset', // ready lists of priorities above 0 (`<class>@<pppp>`), by priority
  groups: 'hash', // id → group (only for messages that have one)
  'group-held': 'hash', // group → its messages held (locked) now (no field at 0)
  parked: 'set', // groups whose parked list `mid-circle#<group>` holds messages claimed while the group was full
  debounce: 'hash', // debounce id → the id of the message that took it last (lazy: checked for still waiting)
  'debounce-of': 'hash', // id → its debounce id, so the index entry goes with the message
  'rate-tat': 'string', // the rate limit's theoretical arrival time (GCRA, model/rate-limit.ts)
  'group-rates': 'zset', // group → when its next message may start (group_rate_limit; only times still to come)
  'group-waits': 'zset', // groups with messages parked for their rate, by that time (lua/lib/group-rates.lua)
  schedules: 'hash', // schedule name → its next slot (ms), a space, then its body
  // Hot path (issue 14).
  'idle-workers': 'hash', // consumer → '<free slots> <lock ms> <until ms>' of parked workers; each has a list
  // `idle-workers:<consumer>` of handoff entries (lua/lib/handoff.lua)
  // Handlers' reports.
  progress: 'hash', // id → the latest progress JSON (only once a handler reported one)
  logs: 'hash', // id → the log as JSON {d: lines dropped, l: lines kept} (only once a handler logged)
  // Flows (lua/lib/flows.lua).
  'waiting-children': 'zset', // flow parents waiting for their children, by when each may run once they have ended
  'children-left': 'hash', // parent id → its children that have not ended yet
  children: 'hash', // parent id → its children, one '<queue> <id>' line each, in the order written
  parent: 'hash', // child id → '<onChildFailure: f, i or r> <parent queue> <parent id>'
  owes: 'hash', // child id → as `parent`, while the child owes its parent a count (until its final end)
  layout: 'string', // '1' once an enqueue's full check found the queue's keys kvmq's: hot paths skip TYPE checks;
  // '1f' while some of its messages owe a flow's parent a count (its finishes look them up)
} as const;

export type KeyName = keyof typeof KEY_TYPES;

export const KEY_NAMES = Object.keys(KEY_TYPES) as KeyName[];

/** The part before the key name: `<prefix>:{<queue>}:`. */
export function queueBase(prefix: string, queue: string): string {
  return `${prefix}:{${queue}}:`;
}

export function queueKey(prefix: string, queue: string, name: KeyName): string {
  return queueBase(prefix, queue) + name;
}

/**
 * The ready list of a lane: a filter class ('' is the unfiltered one, `mid-circle`), with `@` and a 4-digit
 * priority when above 0 (`mid-circle:a=x@0003`); `#<group>` is the list of a full group's parked messages.
 */
export function readyListKey(prefix: string, queue: string, lane: string): string {
  const list = queueKey(prefix, queue, 'mid-circle');
  if (lane === '' || lane.startsWith('@') || lane.startsWith('#')) return list + lane;
  return `${list}:${lane}`;
}

/** The key of a turn (`takeTurn`): a flag whose TTL is the turn's length. */
export function turnKey(prefix: string, queue: string, name: string): string {
  return `${queueBase(prefix, queue)}turn:${name}`;
}

/** Every queue that has had a configuration or messages (kept per process at first use; no hash tag). */
export function registryKey(prefix: string): string {
  return `${prefix}:queues`;
}

/** Keys a prefix may hold; `{` and `}` would move the hash tag off the queue name. */
export const PREFIX_PATTERN = /^[A-Za-z0-9_.:@-]{1,100}$/;
