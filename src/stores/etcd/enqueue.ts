/**
 * kvmq's producer. It knows the protocol, so it makes the first move itself:
 * each new message goes straight into the ordered queue
 * (`/queue/{q}/{idx}/{id}`, value: the payload) with its record, in one Txn
 * per batch guarded by "no record with this id" — the dedupe. A backlog thus
 * builds in order even while no dispatcher runs, at one write per message
 * (a plain producer's key costs a second one: the dispatcher's move).
 *
 * An id that exists is refused with its state, except: `done-awaiting-gc` is
 * revived; with allowRequeue, `locked` is marked to run again after it
 * finishes, and `done-with-backoff` to run again when its backoff ends.
 */
import { newNonce } from './nonce.js';
import { StoreLayoutError } from '../../model/errors.js';
import { newIdx, newLifoIdx, type QueueKeys } from './keys.js';
import { decodeRecord, encodeRecord, stateOf, type MessageRecord } from './record.js';
import { freshRecord, indexOps } from './transitions.js';
import { changeEvents } from './event-ops.js';
import { runBatch, type Change, type ChangeResult } from './txn-batch.js';
import { laneOf, type LaneEntry } from './txn-lane.js';
import { countChange, type CountDelta } from './counts.js';
import { debounceChange, debounceCompare, debounceTarget } from './debounce.js';
import type { Compare, Kv, Op } from './kv.js';
import type { NewMessage } from '../contract/contract.js';
import type { EnqueueResult } from '../../model/types.js';

// Tries of one message's update against concurrent changes before giving up with an error.
const MAX_TRIES = 10;

interface Adding extends Change {
  readonly message: NewMessage;
  readonly nonce: string;
}

/** `events`: the queue's configuration has events on (an `enqueued` event goes with each message stored). */
export async function enqueueMessages(
  kv: Kv,
  keys: QueueKeys,
  messages: readonly NewMessage[],
  events: boolean,
): Promise<EnqueueResult[]> {
  // The same id twice in one batch: the later one sees what the earlier one did, as if sent after it.
  const results: (EnqueueResult | undefined)[] = new Array<EnqueueResult | undefined>(messages.length);
  let rest = messages.map((message, i) => ({ message, i }));
  while (rest.length > 0) {
    const seen = new Set<string>();
    const layer: typeof rest = [];
    const later: typeof rest = [];
    for (const item of rest) {
      if (seen.has(item.message.id)) later.push(item);
      else {
        seen.add(item.message.id);
        layer.push(item);
      }
    }
    const plain = layer.filter((l) => l.message.debounceId === null);
    const layerResults = await enqueueUnique(
      kv,
      keys,
      plain.map((l) => l.message),
      events,
    );
    plain.forEach((l, j) => (results[l.i] = layerResults[j]));
    // Debounced ones one by one, in order, also across calls: each may replace what the one before it added.
    for (const l of layer) {
      if (l.message.debounceId !== null)
        results[l.i] = await inTurn(kv, keys, () => enqueueDebounced(kv, keys, l.message, events));
    }
    rest = later;
  }
  return results.map((r) => {
    if (r === undefined) throw new Error('kvmq: an enqueue got no result');
    return r;
  });
}

/** Where one message's answer goes. */
export interface Answer {
  readonly resolve: (result: EnqueueResult) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * As enqueueMessages, but each message is answered as soon as its own Txn is (the tick's calls of the client
 * come as one batch, their callers resume one Txn at a time). A batch with a debounce id or an id twice takes
 * enqueueMessages's way and is answered at its end.
 */
export function submitEnqueues(
  kv: Kv,
  keys: QueueKeys,
  messages: readonly NewMessage[],
  events: boolean,
  answers: readonly Answer[],
): void {
  const ids = new Set<string>();
  for (const m of messages) {
    if (m.debounceId !== null || ids.has(m.id)) {
      enqueueMessages(kv, keys, messages, events).then(
        (results) => results.forEach((r, i) => answers[i]?.resolve(r)),
        (error: unknown) => answers.forEach((a) => a.reject(error)),
      );
      return;
    }
    ids.add(m.id);
  }
  const entries = messages.map((message, i): LaneEntry => {
    const change = adding(keys, message, events);
    const answer = answers[i] as Answer;
    return {
      change,
      resolve: (result) => {
        if (result.ok) answer.resolve({ ok: true, id: message.id, action: 'added' });
        else settleRefused(kv, keys, change, result, events).then(answer.resolve, answer.reject);
      },
      reject: answer.reject,
    };
  });
  laneOf(kv, `enqueue ${keys.prefix}`).submit(entries);
}

/** A first attempt whose compare failed: the id exists, or existed and is gone again. */
async function settleRefused(
  kv: Kv,
  keys: QueueKeys,
  change: Adding,
  result: Extract<ChangeResult, { ok: false }>,
  events: boolean,
): Promise<EnqueueResult> {
  const { message } = change;
  const kvRecord = result.reads[0]?.kvs[0];
  const record = kvRecord === undefined ? null : decodeRecord(kvRecord.value);
  if (kvRecord === undefined) {
    const [again] = await enqueueUnique(kv, keys, [message], events);
    if (again === undefined) throw new Error('kvmq: an enqueue got no result');
    return again;
  }
  // Our own write, applied by a call the client library sent again.
  if (record?.nonce === change.nonce) return { ok: true, id: message.id, action: 'added' };
  if (record === null) {
    throw new StoreLayoutError(`${kvRecord.key} holds data kvmq did not write; remove it or use another id`);
  }
  return enqueueExisting(kv, keys, message, record, kvRecord.modRevision, events);
}

// Per connection and queue, the debounced enqueue last started: the next one waits for it.
const debounceTurns = new WeakMap<Kv, Map<string, Promise<unknown>>>();

/**
 * Runs `step` after the debounced enqueues of the queue started before it on this connection. Concurrent calls
 * (the store takes each call as it comes) would otherwise all read the same waiting message and retry
 * against each other.
 */
function inTurn<T>(kv: Kv, keys: QueueKeys, step: () => Promise<T>): Promise<T> {
  let byQueue = debounceTurns.get(kv);
  if (byQueue === undefined) {
    byQueue = new Map();
    debounceTurns.set(kv, byQueue);
  }
  const before = byQueue.get(keys.prefix) ?? Promise.resolve();
  const mine = before.then(step, step);
  const turn = mine.catch(() => undefined);
  byQueue.set(keys.prefix, turn);
  void turn.then(() => {
    if (byQueue.get(keys.prefix) === turn) byQueue.delete(keys.prefix);
  });
  return mine;
}

async function enqueueUnique(
  kv: Kv,
  keys: QueueKeys,
  messages: readonly NewMessage[],
  events: boolean,
): Promise<EnqueueResult[]> {
  const results = new Map<string, EnqueueResult>();
  const existing = new Map<string, { message: NewMessage; record: MessageRecord; rev: number }>();
  let pending = messages.map((message) => adding(keys, message, events));
  for (let tries = 0; pending.length > 0; tries++) {
    if (tries >= MAX_TRIES) throw new Error(`kvmq: enqueue to ${keys.queue} kept conflicting; try again`);
    const retry: Adding[] = [];
    // The queue's lane: the changes of concurrent enqueue calls share Txns (txn-lane.ts).
    const outcome = await laneOf(kv, `enqueue ${keys.prefix}`).run(pending);
    pending.forEach((change, i) => {
      const result = outcome[i];
      if (result === undefined) return;
      if (result.ok) {
        results.set(change.message.id, { ok: true, id: change.message.id, action: 'added' });
        return;
      }
      const kvRecord = result.reads[0]?.kvs[0];
      const record = kvRecord === undefined ? null : decodeRecord(kvRecord.value);
      if (kvRecord === undefined) retry.push(adding(keys, change.message, events));
      else if (record?.nonce === change.nonce) {
        // Our own write, applied by a call the client library sent again.
        results.set(change.message.id, { ok: true, id: change.message.id, action: 'added' });
      } else if (record === null) {
        throw new StoreLayoutError(`${kvRecord.key} holds data kvmq did not write; remove it or use another id`);
      } else existing.set(change.message.id, { message: change.message, record, rev: kvRecord.modRevision });
    });
    pending = retry;
  }
  for (const { message, record, rev } of existing.values()) {
    results.set(message.id, await enqueueExisting(kv, keys, message, record, rev, events));
  }
  return messages.map((m) => {
    const result = results.get(m.id);
    if (result === undefined) throw new Error('kvmq: an enqueue got no result');
    return result;
  });
}

/**
 * One message's enqueue as a change to commit with others in one Txn (a schedule's firing), after the reads
 * that decide it: added, debounced, revived, requeued, or refused (a compare on its record, no write), each
 * as `enqueue` would. When the Txn fails, plan again.
 */
export async function planEnqueue(
  kv: Kv,
  keys: QueueKeys,
  message: NewMessage,
  events: boolean,
): Promise<{ change: Change; result: EnqueueResult }> {
  const now = Date.now();
  if (message.debounceId !== null) {
    const target = await debounceTarget(kv, keys, message.debounceId);
    if (target.waiting !== null) {
      return {
        change: debounceChange(keys, message, target.waiting, events, now),
        result: { ok: true, id: target.waiting.id, action: 'debounced' },
      };
    }
    const item = (await kv.range({ key: keys.record(message.id) })).kvs[0];
    if (item === undefined) {
      return {
        change: adding(keys, message, events, [debounceCompare(keys, message.debounceId, target.entryRev)]),
        result: { ok: true, id: message.id, action: 'added' },
      };
    }
  }
  const item = (await kv.range({ key: keys.record(message.id) })).kvs[0];
  if (item === undefined)
    return { change: adding(keys, message, events), result: { ok: true, id: message.id, action: 'added' } };
  const record = decodeRecord(item.value);
  if (record === null) {
    throw new StoreLayoutError(`${item.key} holds data kvmq did not write; remove it or use another id`);
  }
  const state = stateOf(record, now);
  const plan = await planExisting(kv, keys, message, record, state, now);
  const compares = [{ key: keys.record(message.id), target: 'mod', result: '=', operand: item.modRevision } as const];
  if (plan === null) return { change: { compares, ops: [], reads: [] }, result: { ok: false, id: message.id, state } };
  return {
    change: {
      compares,
      ops: plan.ops,
      reads: [],
      events: changeEvents(keys, events, { type: 'enqueued', id: message.id, attempt: plan.attempt }),
      counts: plan.counts,
    },
    result: { ok: true, id: message.id, action: plan.action },
  };
}

/** A message with a debounce id: replaces the waiting message of that id, or is added as its waiting one. */
async function enqueueDebounced(kv: Kv, keys: QueueKeys, message: NewMessage, events: boolean): Promise<EnqueueResult> {
  const debounceId = message.debounceId ?? '';
  for (let tries = 0; tries < MAX_TRIES; tries++) {
    const target = await debounceTarget(kv, keys, debounceId);
    const change =
      target.waiting === null
        ? adding(keys, message, events, [debounceCompare(keys, debounceId, target.entryRev)])
        : debounceChange(keys, message, target.waiting, events, Date.now());
    const [result] = (await runBatch(kv, [change])).results;
    if (result?.ok === true) {
      return target.waiting === null
        ? { ok: true, id: message.id, action: 'added' }
        : { ok: true, id: target.waiting.id, action: 'debounced' };
    }
    if (target.waiting === null) {
      // The id exists (revive, requeue or refuse it as any enqueue would), or the entry changed: look again.
      const kvRecord = result?.reads[0]?.kvs[0];
      const record = kvRecord === undefined ? null : decodeRecord(kvRecord.value);
      if (kvRecord !== undefined && record === null) {
        throw new StoreLayoutError(`${kvRecord.key} holds data kvmq did not write; remove it or use another id`);
      }
      if (kvRecord !== undefined && record !== null) {
        return enqueueExisting(kv, keys, message, record, kvRecord.modRevision, events);
      }
    }
  }
  throw new Error(`kvmq: enqueue of ${message.id} to ${keys.queue} kept conflicting; try again`);
}

function adding(keys: QueueKeys, message: NewMessage, events: boolean, extra: readonly Compare[] = []): Adding {
  const now = Date.now();
  const nonce = newNonce();
  const idx = message.lifo ? newLifoIdx(message.priority) : newIdx(message.priority);
  const record = freshRecord(
    {
      idx,
      encoding: message.encoding,
      metadata: message.metadata,
      filterClass: message.filterClass,
      readyAt: now + message.initialBackoffMs,
      source: 'kvmq',
      nonce,
      policy: message.policy,
      priority: message.priority,
      group: message.group,
      debounceId: message.debounceId,
    },
    now,
  );
  const recordKey = keys.record(message.id);
  const ops: Op[] = [
    { type: 'put', key: keys.ordered(idx, message.id), value: asBuffer(message.payload) },
    { type: 'put', key: recordKey, value: encodeRecord(record) },
  ];
  // A message enqueued with a backoff (or as a debounce's waiting one) has index entries; most have none.
  for (const op of indexOps(keys, message.id, null, record)) ops.push(op);
  const absent: Compare = { key: recordKey, target: 'version', result: '=', operand: 0 };
  return {
    message,
    nonce,
    // No spread for the common case (no extra compares): this runs for every message.
    compares: extra.length === 0 ? [absent] : [absent, ...extra],
    ops,
    reads: [{ type: 'range', key: recordKey }],
    events: events ? changeEvents(keys, true, { type: 'enqueued', id: message.id, attempt: 0 }) : undefined,
    counts: countChange(keys, null, record),
  };
}

/** One message whose id exists: revive, requeue or refuse, retried against concurrent changes. */
async function enqueueExisting(
  kv: Kv,
  keys: QueueKeys,
  message: NewMessage,
  first: MessageRecord,
  firstRev: number,
  events: boolean,
): Promise<EnqueueResult> {
  let record: MessageRecord | null = first;
  let rev = firstRev;
  for (let tries = 0; tries < MAX_TRIES; tries++) {
    if (record === null) {
      // Gone meanwhile (GC, clear): the id is new again.
      const [result] = await enqueueUnique(kv, keys, [message], events);
      if (result === undefined) throw new Error('kvmq: an enqueue got no result');
      return result;
    }
    const now = Date.now();
    const state = stateOf(record, now);
    const plan = await planExisting(kv, keys, message, record, state, now);
    if (plan === null) return { ok: false, id: message.id, state };
    const { results } = await runBatch(kv, [
      {
        compares: [{ key: keys.record(message.id), target: 'mod', result: '=', operand: rev }],
        ops: plan.ops,
        reads: [{ type: 'range', key: keys.record(message.id) }],
        events: changeEvents(keys, events, { type: 'enqueued', id: message.id, attempt: plan.attempt }),
        counts: plan.counts,
      },
    ]);
    const res = results[0];
    if (res?.ok === true) return { ok: true, id: message.id, action: plan.action };
    const kvRecord = res?.reads[0]?.kvs[0];
    record = kvRecord === undefined ? null : decodeRecord(kvRecord.value);
    rev = kvRecord?.modRevision ?? 0;
    if (kvRecord !== undefined && record === null) {
      throw new StoreLayoutError(`${kvRecord.key} holds data kvmq did not write; remove it or use another id`);
    }
  }
  throw new Error(`kvmq: enqueue of ${message.id} to ${keys.queue} kept conflicting; try again`);
}

interface RunAgain {
  ops: Op[];
  action: 'revived' | 'requeued';
  attempt: number;
  counts: CountDelta[];
}

/** A finished message queued to run again from attempt 1 with `value`: its new record, the kept payload dropped. */
function runAgain(
  keys: QueueKeys,
  id: string,
  old: MessageRecord,
  record: MessageRecord,
  value: Buffer,
  action: RunAgain['action'],
): RunAgain {
  return {
    action,
    attempt: 0,
    counts: countChange(keys, old, record),
    ops: [
      { type: 'put', key: keys.ordered(record.idx ?? '', id), value },
      { type: 'put', key: keys.record(id), value: encodeRecord(record) },
      { type: 'delete', key: keys.payload(id) },
      ...indexOps(keys, id, old, record),
    ],
  };
}

async function planExisting(
  kv: Kv,
  keys: QueueKeys,
  m: NewMessage,
  r: MessageRecord,
  state: ReturnType<typeof stateOf>,
  now: number,
): Promise<RunAgain | null> {
  const payload = asBuffer(m.payload);
  if (state === 'done-awaiting-gc') {
    const idx = m.lifo ? newLifoIdx(m.priority) : newIdx(m.priority);
    const record = freshRecord(
      {
        idx,
        encoding: m.encoding,
        metadata: m.metadata,
        filterClass: m.filterClass,
        readyAt: now + m.initialBackoffMs,
        source: 'kvmq',
        nonce: newNonce(),
        policy: m.policy,
        history: r.history,
        priority: m.priority,
        group: m.group,
        debounceId: m.debounceId,
      },
      now,
    );
    return runAgain(keys, m.id, r, record, payload, 'revived');
  }
  if (m.allowRequeue && state === 'done-with-backoff') {
    // The requeued run carries the new payload, or the one that ran (kept while the backoff lasts).
    let value = payload;
    if (!m.replacePayload) {
      const kept = await kv.range({ key: keys.payload(m.id) });
      value = kept.kvs[0]?.value ?? Buffer.alloc(0);
    }
    const idx = newIdx(r.priority);
    const record: MessageRecord = {
      ...r,
      phase: 'pending',
      idx,
      readyAt: r.backoffUntil,
      requeue: true,
      attempt: 0,
      losses: 0,
      encoding: m.replacePayload ? m.encoding : r.encoding,
      updatedAt: now,
      // The new run starts without the last one's result.
      result: undefined,
      resultEncoding: undefined,
    };
    return runAgain(keys, m.id, r, record, value, 'requeued');
  }
  if (m.allowRequeue && state === 'locked') {
    const record: MessageRecord = {
      ...r,
      requeue: true,
      nextEncoding: m.replacePayload ? m.encoding : null,
      updatedAt: now,
    };
    const ops: Op[] = [{ type: 'put', key: keys.record(m.id), value: encodeRecord(record) }];
    if (m.replacePayload) ops.push({ type: 'put', key: keys.payload(m.id), value: payload });
    // The running attempt goes on; the requeued run starts later from attempt 0.
    return { action: 'requeued', attempt: r.attempt, ops, counts: [] };
  }
  return null;
}

export function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
