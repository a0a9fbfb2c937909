/**
 * Actions on messages by id: retry (failed → queued at attempt 0), remove
 * (any state but a running one) and promote (a backoff ends now). Each id is
 * one Txn guarded by its record's mod revision, read again and replanned when
 * another writer got there first. The dispatcher sees the record change (and a
 * new ordered key) in its watch and delivers, as for an enqueue. retryFailed
 * redrives the oldest failures in one Txn. update changes a waiting message's
 * content, priority, ready time or filters, guarded by its record as the others.
 */
import { MAX_PAYLOAD_BYTES, idxWithPriority, newIdx, parseTimeKey, type QueueKeys } from './keys.js';
import { prefixEnd, type Compare, type KeyValue, type Kv, type Op } from './kv.js';
import { encodeRecord, stateOf, type MessageRecord } from './record.js';
import { readRecord } from './inspect.js';
import { payloadKeyOf } from './listing.js';
import { consumerIdOf, deadLetterCompare, deadLetterOps, failedRecord, indexOps } from './transitions.js';
import { appendHistory } from '../../model/history.js';
import { CANCELABLE_STATES } from '../../model/cancel.js';
import { UPDATABLE_STATES, type MessageEdit } from '../../model/update.js';
import { getMany, pack, runBatch, type Change } from './txn-batch.js';
import { changeEvents, eventOps } from './event-ops.js';
import { countChange, DEAD_LETTERED, type CountDelta } from './counts.js';
import { FlowEnds, settled } from './flow-ends.js';
import type { ActionResult, MessageState } from '../../model/types.js';

const MAX_TRIES = 10;
/** The error a removed flow child ends with for its parent (its policy then applies). */
export const REMOVED = 'removed';
// Failed messages redriven per Txn: four ops each within etcd's 128.
const REDRIVE_PER_TXN = 30;

type Plan =
  | {
      readonly ops: Op[];
      readonly state: MessageState | null;
      readonly counts?: CountDelta[];
      readonly compares?: readonly Compare[];
      /** After a Txn that failed its compares: finds whether one of `compares` failed, for the next plan. */
      readonly afterConflict?: () => Promise<void>;
    }
  | { readonly refused: MessageState };

interface Current {
  readonly record: MessageRecord;
  readonly rev: number;
  /** The payload, when the action asked for it. */
  readonly payload: KeyValue | null;
}

/** Runs an action on each id: plan from the current record, write guarded by its mod revision, again on conflict. */
async function act(
  kv: Kv,
  keys: QueueKeys,
  ids: readonly string[],
  plan: (id: string, current: Current, now: number, ends: FlowEnds) => Plan | Promise<Plan>,
  needsPayload: (r: MessageRecord) => boolean = () => false,
): Promise<ActionResult[]> {
  return Promise.all(
    ids.map(async (id): Promise<ActionResult> => {
      for (let tries = 0; tries < MAX_TRIES; tries++) {
        const res = await kv.range({ key: keys.record(id) });
        const item = res.kvs[0];
        if (item === undefined) return { ok: false, id, state: null };
        const record = readRecord(item);
        // A staged flow's message is not there yet (flow-staging.ts).
        if (record.phase === 'staged') return { ok: false, id, state: null };
        const where = needsPayload(record) ? payloadKeyOf(keys, id, record) : null;
        const payload = where === null ? null : ((await kv.range({ key: where })).kvs[0] ?? null);
        const now = Date.now();
        // What the action does to the message's flow, if any (flow-ends.ts), in the same Txn.
        const ends = new FlowEnds(kv, keys.root);
        const p = await plan(id, { record, rev: item.modRevision, payload }, now, ends);
        if ('refused' in p) return { ok: false, id, state: p.refused };
        const flow = ends.change();
        const compares = [
          { key: keys.record(id), target: 'mod' as const, result: '=' as const, operand: item.modRevision },
          ...(p.compares ?? []),
          ...flow.compares,
        ];
        const counts = [...(p.counts ?? []), ...flow.counts];
        const { results } = await runBatch(kv, [{ compares, ops: [...p.ops, ...flow.ops], reads: [], counts }]);
        if (results[0]?.ok === true) return { ok: true, id, state: p.state };
        await p.afterConflict?.();
      }
      throw new Error(`kvmq: an action on ${id} in ${keys.queue} kept conflicting with other writers; try again`);
    }),
  );
}

/** `act` on one id. */
async function actOne(
  kv: Kv,
  keys: QueueKeys,
  id: string,
  plan: (current: Current, now: number, ends: FlowEnds) => Plan | Promise<Plan>,
  needsPayload: (r: MessageRecord) => boolean,
): Promise<ActionResult> {
  const [result] = await act(kv, keys, [id], (_, current, now, ends) => plan(current, now, ends), needsPayload);
  return result ?? { ok: false, id, state: null };
}

/** What a retry makes of a failed message: pending (retried below). */
const RETRIED = { phase: 'pending', payloadKey: null } as const;

/** A failed message queued again now at attempt 0, its payload back in the ordered queue; null if it cannot be. */
function retried(keys: QueueKeys, id: string, current: Current, now: number, owes = false): Op[] | null {
  const { record: r, payload } = current;
  // A plain put too large for kvmq stays failed (at its producer key) until removed.
  if (payload === null || payload.value.length > MAX_PAYLOAD_BYTES) return null;
  const idx = newIdx(r.priority);
  const next: MessageRecord = {
    ...r,
    phase: 'pending',
    idx,
    attempt: 0,
    losses: 0,
    readyAt: now,
    updatedAt: now,
    lockUntil: null,
    consumer: null,
    backoffUntil: 0,
    requeue: false,
    nextEncoding: null,
    payloadKey: null,
    // A flow's child whose parent still waits owes it a count again (flow-ends.ts childAgain).
    ...(owes && r.flow !== undefined ? { flow: { ...r.flow, owes: true as const } } : {}),
  };
  return [
    { type: 'put', key: keys.ordered(idx, id), value: payload.value },
    { type: 'put', key: keys.record(id), value: encodeRecord(next) },
    { type: 'delete', key: payload.key },
    ...indexOps(keys, id, r, next),
  ];
}

export function retryMessages(
  kv: Kv,
  keys: QueueKeys,
  ids: readonly string[],
  events: boolean,
): Promise<ActionResult[]> {
  return act(
    kv,
    keys,
    ids,
    async (id, current, now, ends) => {
      const state = stateOf(current.record, now);
      if (state !== 'failed') return { refused: state };
      const ops = retried(keys, id, current, now, await ends.childAgain(current.record));
      if (ops === null) return { refused: state };
      return {
        ops: [...ops, ...eventOps(keys, events, now, { type: 'enqueued', id, attempt: 0 })],
        state: 'queued',
        counts: countChange(keys, current.record, RETRIED),
      };
    },
    (r) => r.phase === 'failed',
  );
}

export function removeMessages(
  kv: Kv,
  keys: QueueKeys,
  ids: readonly string[],
  events: boolean,
): Promise<ActionResult[]> {
  return act(kv, keys, ids, async (id, { record: r }, now, ends) => {
    const state = stateOf(r, now);
    if (state === 'locked' || state === 'locked-with-requeue') return { refused: state };
    // A flow's child not ended yet ends for its parent as a failure.
    await ends.childEnded([keys.queue, id], r.flow, { error: REMOVED });
    const ops: Op[] = [
      { type: 'delete', key: keys.record(id) },
      { type: 'delete', key: keys.payload(id) },
      { type: 'delete', key: keys.report(id) },
      ...indexOps(keys, id, r, null),
    ];
    if (r.idx !== null) ops.push({ type: 'delete', key: keys.ordered(r.idx, id) });
    // An expired lock reads as queued: its delivery goes too.
    if (r.phase === 'locked' && r.consumer !== null && r.idx !== null) {
      ops.push({ type: 'delete', key: keys.delivery(r.consumer, r.idx, id) });
    }
    if (r.payloadKey !== null) ops.push({ type: 'delete', key: r.payloadKey });
    ops.push(...eventOps(keys, events, now, { type: 'removed', id, attempt: r.attempt }));
    return { ops, state: null, counts: countChange(keys, r, null) };
  });
}

export function promoteMessages(kv: Kv, keys: QueueKeys, ids: readonly string[]): Promise<ActionResult[]> {
  return act(kv, keys, ids, (id, { record: r }, now) => {
    const state = stateOf(r, now);
    if (state !== 'queued-with-backoff' && state !== 'done-with-requeue') return { refused: state };
    // A requeue waiting for its backoff (at attempt 0) runs now; a backoff ends now.
    const next: MessageRecord = { ...r, readyAt: now, updatedAt: now, requeue: false };
    return {
      ops: [{ type: 'put', key: keys.record(id), value: encodeRecord(next) }, ...indexOps(keys, id, r, next)],
      state: 'queued',
    };
  });
}

/** Redrives up to `max` of the oldest failures in one Txn (at most what fits one); returns how many. */
export async function retryOldestFailed(kv: Kv, keys: QueueKeys, max: number, events: boolean): Promise<number> {
  for (let tries = 0; tries < MAX_TRIES; tries++) {
    const page = await kv.range({
      key: keys.failedIndex,
      end: prefixEnd(keys.failedIndex),
      limit: Math.min(max, REDRIVE_PER_TXN),
      keysOnly: true,
    });
    if (page.kvs.length === 0) return 0;
    const ids = page.kvs.map((item) => parseTimeKey(keys.failedIndex, item.key).id);
    const records = await getMany(
      kv,
      ids.map((id) => keys.record(id)),
    );
    const found = ids.flatMap((id, i) => {
      const item = records[i];
      if (item === null || item === undefined) return [];
      const record = readRecord(item);
      return record.phase === 'failed' ? [{ id, record, rev: item.modRevision }] : [];
    });
    // A flow's child may owe its parent a count again: retried one by one, each with its parent (flow-ends.ts).
    const linked = found.filter((f) => f.record.flow?.parent !== undefined);
    if (linked.length > 0) {
      const results = await retryMessages(
        kv,
        keys,
        linked.map((f) => f.id),
        events,
      );
      return results.filter((r) => r.ok).length;
    }
    const payloads = await getMany(
      kv,
      found.map((f) => payloadKeyOf(keys, f.id, f.record) ?? ''),
    );
    const now = Date.now();
    const changes: Change[] = [];
    found.forEach((f, i) => {
      const ops = retried(keys, f.id, { record: f.record, rev: f.rev, payload: payloads[i] ?? null }, now);
      if (ops === null) return;
      changes.push({
        compares: [{ key: keys.record(f.id), target: 'mod', result: '=', operand: f.rev }],
        ops,
        reads: [],
        events: changeEvents(keys, events, { type: 'enqueued', id: f.id, attempt: 0 }),
        counts: countChange(keys, f.record, RETRIED),
      });
    });
    const [batch] = pack(changes);
    if (batch === undefined) return 0;
    const { results } = await runBatch(kv, batch);
    if (results[0]?.ok === true) return batch.length;
  }
  return 0;
}

/**
 * Cancels a waiting, delayed or running message: it fails with `error` (or moves to the dead-letter queue `dlq`),
 * in one Txn guarded by its record (and, for a move, the id's absence there). A held message's delivery goes in
 * the same Txn: its consumer's inbox watch sees it go, and its worker renews at once and finds it canceled.
 */
export async function cancelMessage(
  kv: Kv,
  keys: QueueKeys,
  id: string,
  error: string,
  events: boolean,
  dlq: QueueKeys | null,
): Promise<ActionResult> {
  // Null once the id is found in the dead-letter queue: the message then fails here, as a final failure does.
  let target = dlq;
  return actOne(
    kv,
    keys,
    id,
    async ({ record: r, payload }, now, ends): Promise<Plan> => {
      const state = stateOf(r, now);
      if (!CANCELABLE_STATES.has(state)) return { refused: state };
      if (r.phase === 'waiting') {
        // A flow's waiting parent fails with its children not started (flow-ends.ts, which writes their events): in
        // place, no dead-letter move.
        await ends.cancelParent([keys.queue, id], error);
        return { ops: [], state: 'failed' };
      }
      await ends.childEnded([keys.queue, id], r.flow, { error });
      const running = r.phase === 'locked';
      const history = running
        ? appendHistory(r.history, {
            attempt: r.attempt,
            startedAt: null,
            endedAt: now,
            consumer: consumerIdOf(r.consumer),
            outcome: 'error',
            error,
          })
        : r.history;
      const failed = settled(failedRecord({ ...r, history }, error, now));
      const ordered = r.idx === null ? null : keys.ordered(r.idx, id);
      const ops: Op[] = [];
      if (running && r.consumer !== null && r.idx !== null) {
        ops.push({ type: 'delete', key: keys.delivery(r.consumer, r.idx, id) });
      }
      ops.push(...eventOps(keys, events, now, { type: 'failed', id, attempt: r.attempt, error }));
      const bytes = payload?.value ?? Buffer.alloc(0);
      if (target !== null) {
        const to = target;
        ops.push(...deadLetterOps(keys, to, id, r, failed, ordered, bytes, now));
        const counts = [...countChange(keys, r, null), ...countChange(to, null, DEAD_LETTERED)];
        const afterConflict = async (): Promise<void> => {
          if ((await kv.range({ key: to.record(id) })).kvs.length > 0) target = null;
        };
        return { ops, state: null, counts, compares: [deadLetterCompare(to, id)], afterConflict };
      }
      ops.push({ type: 'put', key: keys.record(id), value: encodeRecord(failed) });
      if (ordered !== null) ops.push({ type: 'delete', key: ordered });
      // Kept where a retry reads a failed message's payload.
      if (r.payloadKey === null && payload !== null) ops.push({ type: 'put', key: keys.payload(id), value: bytes });
      ops.push(...indexOps(keys, id, r, failed));
      return { ops, state: 'failed', counts: countChange(keys, r, failed) };
    },
    (r) => r.phase === 'pending' || r.phase === 'locked',
  );
}

/**
 * Changes a waiting message in one Txn guarded by its record's mod revision, the revision a dispatcher's delivery
 * compares too: of the two, the first wins and the other fails (a delivery then reads the record again and takes
 * the new content). The payload lives at its ordered key, which a new priority moves to that priority's band (its
 * place by time kept); the dispatcher's watch sees the record and the ordered key change in one revision.
 */
export async function updateMessage(
  kv: Kv,
  keys: QueueKeys,
  id: string,
  edit: MessageEdit,
  events: boolean,
): Promise<ActionResult> {
  return actOne(
    kv,
    keys,
    id,
    ({ record: r, payload }, now): Plan => {
      const read = stateOf(r, now);
      // A holder whose lock ended may still finish its message.
      const state = r.phase === 'locked' && read === 'queued' ? 'locked' : read;
      if (!UPDATABLE_STATES.has(state) || r.idx === null || payload === null) return { refused: state };
      const priority = edit.priority ?? r.priority;
      const idx = priority === r.priority ? r.idx : idxWithPriority(r.idx, priority);
      const next: MessageRecord = {
        ...r,
        idx,
        priority,
        encoding: edit.payload?.encoding ?? r.encoding,
        filterClass: edit.filters?.filterClass ?? r.filterClass,
        ...(edit.delayMs === null ? {} : { readyAt: now + edit.delayMs, requeue: false }),
        updatedAt: now,
      };
      const ops: Op[] = [];
      if (idx !== r.idx) ops.push({ type: 'delete', key: keys.ordered(r.idx, id) });
      if (idx !== r.idx || edit.payload !== null) {
        const value = edit.payload === null ? payload.value : Buffer.from(edit.payload.bytes);
        ops.push({ type: 'put', key: keys.ordered(idx, id), value });
      }
      ops.push({ type: 'put', key: keys.record(id), value: encodeRecord(next) });
      ops.push(...indexOps(keys, id, r, next));
      ops.push(...eventOps(keys, events, now, { type: 'updated', id, attempt: r.attempt }));
      return { ops, state: stateOf(next, now) };
    },
    (r) => r.phase === 'pending',
  );
}
