/**
 * Finish and extend. A finish is one multi that removes the consumer's
 * ephemeral claim and writes `state` with the version the claim (or the last
 * extend) wrote: if the session died, the claim is gone and the multi fails;
 * if another consumer took the message over, the version moved and it fails.
 * Either way the late outcome is refused ('lost') and changes nothing.
 * A batch of finishes is one multi; a conflict sends each through alone.
 */
import { releaseOps } from './group-paths.js';
import { claimFailed, type PreparedClaim } from './claim-build.js';
import { isZkError, ZkCode, type ZkError, type ZkOp, type ZkOpResult } from './client.js';
import { FlowEnds, type ChildEnd } from './flow-ends.js';
import { MultiParts } from './multi-parts.js';
import { heldFor } from './held.js';
import { claimsForFinish, readAheadAfterFinish, recordHandoffs } from './handoff.js';
import { encodeState, entryPrefix, makeState, priorityOf, taskNodes } from './layout.js';
import { endInFailure, failedState, isDeadLetterClash, withHistory } from './fail.js';
import { appendHistory } from '../../model/history.js';
import { resultInRecord } from '../../model/result.js';
import { finishEventText } from '../contract/finish-event-text.js';
import type { Held, StoreContext } from './context.js';
import type { QueueContext } from './queue.js';
import type { EventRecord } from './events.js';
import type { Finish, FinishResult, HeldAttempt } from '../contract/contract.js';
import type { QueueEventType } from '../../model/events.js';
import type { AttemptRecord, Outcome } from '../../model/types.js';

/** The event a finish writes, by its outcome (a failure's is written where it ends: fail.ts). */
const EVENT_OF_OUTCOME: Record<Outcome, QueueEventType> = { success: 'completed', retry: 'retrying', error: 'failed' };

// After a claim riding on a finish lost a race, finishes claim nothing for this long.
const CLAIM_AHEAD_PAUSE_MS = 250;

// What the results of one finish multi may take, counted at four times their size (each is in the state node and
// in the event node, JSON-escaped or in base64), so a batch of large results stays well inside MULTI_BYTES.
const RESULT_BYTES_PER_MULTI = 512 * 1024;

/**
 * Finishes in as few multis as the results' sizes allow: one for a batch whose results are small (or absent,
 * the common case), else consecutive parts each within RESULT_BYTES_PER_MULTI.
 */
export async function finishInParts(
  ctx: StoreContext,
  q: QueueContext,
  consumer: string,
  finishes: readonly Finish[],
): Promise<FinishResult[]> {
  if (!finishes.some((f) => f.result !== undefined)) return finishMessages(ctx, q, consumer, finishes);
  const parts: Finish[][] = [[]];
  let bytes = 0;
  for (const f of finishes) {
    const size = 4 * (f.result?.bytes.byteLength ?? 0);
    if (bytes + size > RESULT_BYTES_PER_MULTI && bytes > 0) {
      parts.push([]);
      bytes = 0;
    }
    bytes += size;
    parts[parts.length - 1]?.push(f);
  }
  if (parts.length === 1) return finishMessages(ctx, q, consumer, finishes);
  const results: FinishResult[] = [];
  for (const part of parts) results.push(...(await finishMessages(ctx, q, consumer, part)));
  return results;
}

/** A finish of the batch (its index in `pending`), or a claim riding on the multi (its index in `claims`). */
type Part = { readonly finish: number } | { readonly claim: number };

/** One finish multi as planned: its parts, the claims riding on it, and what to do once it committed. */
interface FinishPlan {
  readonly multi: MultiParts<Part>;
  readonly claims: PreparedClaim[];
  readonly claimParts: Part[];
  readonly newBuckets: string[];
  /** The consumer's `current` node, set in the multi (null: not registered). */
  readonly current: string | null;
  /** Counts the flow children's ends for their parents; null when none of the batch owes one. */
  readonly flow: FlowEnds | null;
  readonly dlqs: Set<string>;
}

interface Pending {
  readonly index: number;
  readonly held: Held;
}

export async function finishMessages(
  ctx: StoreContext,
  q: QueueContext,
  consumer: string,
  finishes: readonly Finish[],
): Promise<FinishResult[]> {
  const results = new Array<FinishResult>(finishes.length).fill('lost');
  let pending: Pending[] = [];
  for (const [index, f] of finishes.entries()) {
    const held = await heldFor(ctx, q, consumer, f.id, f.attempt);
    if (held !== null) pending.push({ index, held });
  }
  const retry = { claimAhead: true, clashes: new Set<string>() };
  // One multi for them all; a failure names the message at fault, which goes alone (or is lost).
  for (let tries = 0; pending.length > 0 && tries < 3 * finishes.length + 3; tries++) {
    const plan = await planFinish(ctx, q, consumer, finishes, pending, retry);
    const epoch = ctx.zk.epoch;
    try {
      const committing = ctx.zk.multi(plan.multi.ops);
      if (retry.claimAhead) readAheadAfterFinish(ctx, q, consumer, pending.length);
      const created = await committing;
      finished(ctx, q, consumer, finishes, pending, plan, created, epoch);
      for (const p of pending) results[p.index] = 'ok';
      return results;
    } catch (error) {
      if (!isZkError(error) || error.opIndex < 0) throw error;
      const culprit = await recoverFinish(ctx, q, consumer, pending, plan, error, retry);
      if (culprit === null) continue;
      // Look again at the culprit: still ours (the state changed, e.g. a requeue mark), or lost.
      const again = await heldFor(ctx, q, consumer, culprit.held.id, culprit.held.attempt, true);
      pending = pending.filter((p) => p !== culprit);
      if (again !== null) pending.push({ index: culprit.index, held: again });
    } finally {
      for (const c of plan.claims) ctx.claims.trying.delete(c.candidate.entry.path);
    }
  }
  return results;
}

/** The multi of a batch's finishes, the claims riding on it, the consumer's `current` and the events. */
async function planFinish(
  ctx: StoreContext,
  q: QueueContext,
  consumer: string,
  finishes: readonly Finish[],
  pending: readonly Pending[],
  retry: { readonly claimAhead: boolean; readonly clashes: ReadonlySet<string> },
): Promise<FinishPlan> {
  const dlqs = new Set<string>();
  const config = await q.eventsConfig();
  const built = await Promise.all(
    pending.map((p) => finishOps(ctx, q, p.held, finishes[p.index] as Finish, !retry.clashes.has(p.held.id), dlqs)),
  );
  // A flow child's end counts for its parent in this multi; in batch order, so siblings chain the parent's version.
  // Messages outside flows owe nothing: no read, no op, not even the planner.
  const flow = pending.some((p) => p.held.state.owes === true) ? new FlowEnds(ctx) : null;
  for (const [k, p] of pending.entries()) {
    const b = built[k];
    if (flow !== null && p.held.state.owes === true && b?.end !== undefined) {
      b.ops.push(...(await flow.childEnded(q, p.held.id, p.held.state, b.end)));
    }
  }
  const multi = new MultiParts<Part>();
  // The done list's (or a sub-queue's) next bucket, when the last one filled up, is made in the same multi.
  const bucketOps = q.bucketCreates(built.flatMap((b) => b.ops));
  multi.add(undefined, bucketOps);
  built.forEach((b, k) => multi.add({ finish: k }, b.ops));
  // The slots these finishes free are filled in the same multi (see handoff.ts).
  // Messages this finish queues again come before any lower priority the claims ahead could take.
  const requeued = pending.filter((p) => finishes[p.index]?.outcome === 'retry' || p.held.state.requeue);
  const upTo = Math.min(Infinity, ...requeued.map((p) => priorityOf(p.held.state)));
  const claims = retry.claimAhead ? claimsForFinish(ctx, q, consumer, pending.length, Date.now(), upTo) : [];
  const claimParts = claims.map((c, k): Part => {
    const part = { claim: k };
    multi.add(part, c.ops);
    return part;
  });
  const current = ctx.currentPath(q.name, consumer);
  if (current !== null) {
    const without = pending.map((p) => p.held.id);
    const extra = claims.map((c) => c.candidate.entry.id);
    const data = ctx.currentData(q.name, consumer, extra, without);
    multi.add(undefined, [{ op: 'set', path: current, data, version: -1 }]);
  }
  // Every event of this multi in one node: the finishes' and the claims' riding on them.
  multi.add(undefined, q.events.ops(config, [...built.flatMap((b) => b.events), ...claims.map((c) => c.event)]));
  const newBuckets = bucketOps.map((op) => op.path);
  return { multi, claims, claimParts, newBuckets, current, flow, dlqs };
}

/** After the finish multi committed: what this process keeps, the claims it made, and wake-ups. */
function finished(
  ctx: StoreContext,
  q: QueueContext,
  consumer: string,
  finishes: readonly Finish[],
  pending: readonly Pending[],
  plan: FinishPlan,
  created: readonly ZkOpResult[],
  epoch: number,
): void {
  q.noteBucketsMade(plan.newBuckets);
  created.forEach((r, k) => notePath(ctx, plan.multi.ops[k], r.path));
  for (const p of pending) {
    ctx.dropHeld(q.name, consumer, p.held.id, p.held.attempt);
    // The entry is gone: no claim of this process need look at it again.
    ctx.claims.forgetEntry(p.held.entryPath);
    q.listOf(p.held.entryPath)?.forgetPath(p.held.entryPath);
  }
  const handoffs = plan.claims.map((claim, k) => {
    const at = plan.multi.startOf(plan.claimParts[k] as Part) + claim.stateOp;
    return { claim, stateVersion: created[at]?.version };
  });
  recordHandoffs(ctx, q, consumer, handoffs, epoch);
  if (pending.some((p) => finishes[p.index]?.outcome === 'retry' || p.held.state.requeue)) {
    ctx.wakeups.notify(q.name);
  }
  for (const woken of [...plan.dlqs, ...(plan.flow?.wakes ?? [])]) ctx.wakeups.notify(woken);
}

/**
 * After the finish multi failed on `error`: sets up the next try and returns null, or returns the finish at
 * fault (to be read again). Throws what no try can mend.
 */
async function recoverFinish(
  ctx: StoreContext,
  q: QueueContext,
  consumer: string,
  pending: readonly Pending[],
  plan: FinishPlan,
  error: ZkError,
  retry: { claimAhead: boolean; readonly clashes: Set<string> },
): Promise<Pending | null> {
  const part = plan.multi.partAt(error.opIndex);
  if (part !== undefined && 'claim' in part) {
    // A claim riding along lost a race: finish alone, and leave claiming to the next claim.
    const failed = plan.claims[part.claim];
    const at = error.opIndex - plan.multi.startOf(part);
    if (failed !== undefined) claimFailed(ctx, q, failed, error.code, at);
    // Others take from the same place: give them a moment before riding claims on finishes again.
    ctx.claims.pauseClaimAhead(q.name, consumer, CLAIM_AHEAD_PAUSE_MS);
    retry.claimAhead = false;
    return null;
  }
  const failedOp = plan.multi.ops[error.opIndex];
  const culprit = part === undefined ? undefined : pending[part.finish];
  if (isDeadLetterClash(q, error.code, failedOp)) {
    if (culprit === undefined) throw error;
    retry.clashes.add(culprit.held.id);
    return null;
  }
  if (error.code === ZkCode.NodeExists && failedOp !== undefined && plan.newBuckets.includes(failedOp.path)) {
    // Another writer made that bucket first.
    q.noteBucketsMade([failedOp.path]);
    return null;
  }
  if (error.code === ZkCode.NoNode && failedOp?.op === 'create') {
    // The sub-queue or done bucket to write to is missing: make it, try again.
    await makeBucket(q, failedOp.path);
    return null;
  }
  if (failedOp?.path === plan.current) {
    ctx.registered.delete(`${q.name}\u0000${consumer}`);
    return null;
  }
  // A flow parent another end wrote meanwhile: plan again from a fresh read.
  if (failedOp !== undefined && plan.flow?.parentPaths.has(failedOp.path) === true) return null;
  if (culprit === undefined) throw error;
  return culprit;
}

/** A finish's ops and events, and how it ends the message for a flow's parent (undefined: it runs again). */
interface FinishOps {
  readonly ops: ZkOp[];
  readonly events: EventRecord[];
  readonly end?: ChildEnd;
}

/** `deadLetter`: a failure may move to the dead-letter queue; `dlqs` gathers the queues moved to. */
async function finishOps(
  ctx: StoreContext,
  q: QueueContext,
  held: Held,
  f: Finish,
  deadLetter: boolean,
  dlqs: Set<string>,
): Promise<FinishOps> {
  const now = Date.now();
  const s = held.state;
  const ops: ZkOp[] = [
    { op: 'remove', path: taskNodes(held.taskPath).claim, version: -1 },
    ...releaseOps(q, held.id, s),
  ];
  const { event, history } = finishRecords(held, f, now);
  if (f.outcome === 'retry' || s.requeue) {
    return { ops: [...ops, ...(await againOps(ctx, q, held, f, history, now))], events: event };
  }
  if (f.outcome === 'error') {
    const failed = failedState(s, now, f.error, history);
    const ended = await endInFailure(ctx, q, held.id, failed, held.stateVersion, held.entryPath, deadLetter);
    if (ended.dlq !== null) dlqs.add(ended.dlq);
    return { ops: [...ops, ...ended.ops], events: f.startedAt === null ? [] : [ended.event], end: { error: f.error } };
  }
  const prefix = `${await q.done.tailBucket()}/${entryPrefix(now, held.id)}`;
  const done = makeState(
    {
      ...s,
      phase: 'done',
      lockUntil: 0,
      consumer: null,
      backoffUntil: now + f.backoffMs,
      requeue: false,
      outcome: f.outcome,
      lastError: f.error,
      updatedAt: now,
      entry: null,
      done: prefix,
      // Its end pays a flow child's count (flow-ends.ts), in this multi.
      owes: undefined,
      // Kept in the state written anyway: no node, no op more.
      ...(f.result === undefined ? {} : resultInRecord(f.result)),
    },
    now,
  );
  ops.push({ op: 'set', path: taskNodes(held.taskPath).state, data: encodeState(done), version: held.stateVersion });
  ops.push({ op: 'remove', path: held.entryPath, version: -1 });
  ops.push({ op: 'create', path: prefix, kind: 'sequential' });
  ops.push(...(await q.waitingOps(held.id, done.backoffUntil, now)));
  return { ops, events: event, end: null };
}

/** A finish's event and the history it leaves: a run handed back unrun (startedAt null) has neither. */
function finishRecords(
  held: Held,
  f: Finish,
  now: number,
): { event: EventRecord[]; history: readonly AttemptRecord[] | undefined } {
  const s = held.state;
  const event: EventRecord[] =
    f.startedAt === null
      ? []
      : [{ type: EVENT_OF_OUTCOME[f.outcome], id: held.id, attempt: s.attempt, at: now, error: finishEventText(f) }];
  // A success leaves no record either.
  const history =
    f.startedAt !== null && f.outcome !== 'success'
      ? appendHistory(s.history ?? [], {
          attempt: s.attempt,
          startedAt: f.startedAt,
          endedAt: now,
          consumer: held.consumer,
          outcome: f.outcome,
          error: f.error,
        })
      : s.history;
  return { event, history };
}

/** A retry, or a requeued run: the message is queued again (after its backoff), a new entry in its sub-queue. */
async function againOps(
  ctx: StoreContext,
  q: QueueContext,
  held: Held,
  f: Finish,
  history: readonly AttemptRecord[] | undefined,
  now: number,
): Promise<ZkOp[]> {
  const s = held.state;
  const nodes = taskNodes(held.taskPath);
  const requeued = f.outcome !== 'retry' && s.requeue;
  const readyAt = now + f.backoffMs;
  const sub = q.sub(s.filterClass, priorityOf(s));
  const prefix = `${await sub.tailBucket()}/${entryPrefix(readyAt, held.id)}`;
  const next = makeState(
    {
      ...s,
      phase: 'pending',
      readyAt,
      lockUntil: 0,
      consumer: null,
      // A requeued run starts again at attempt 0; with a backoff it waits as done-with-requeue.
      attempt: requeued ? 0 : s.attempt,
      requeue: requeued && f.backoffMs > 0,
      nextEncoding: null,
      encoding: s.nextEncoding ?? s.encoding,
      outcome: f.outcome,
      lastError: f.error,
      updatedAt: now,
      entry: prefix,
      ...withHistory(history),
      // A requeued run starts with no lost deliveries, and without a result.
      ...(requeued ? { losses: undefined, result: undefined, resultEncoding: undefined } : {}),
    },
    now,
  );
  const ops: ZkOp[] = [{ op: 'set', path: nodes.state, data: encodeState(next), version: held.stateVersion }];
  if (s.nextEncoding !== null) {
    // The requeue replaced the payload: the next run carries it.
    const replacement = await ctx.zk.get(nodes.next);
    ops.push({ op: 'set', path: nodes.data, data: replacement.data, version: -1 });
    ops.push({ op: 'remove', path: nodes.next, version: -1 });
  }
  ops.push({ op: 'remove', path: held.entryPath, version: -1 });
  ops.push({ op: 'create', path: prefix, kind: 'sequential' });
  ops.push(...(await q.waitingOps(held.id, readyAt, now)));
  ops.push({ op: 'set', path: q.paths.classDir(s.filterClass, priorityOf(s)), data: Buffer.alloc(0), version: -1 });
  return ops;
}

/** After a multi: a sequential create moves its list's tail on once the bucket is full (in any queue). */
export function notePath(ctx: StoreContext, op: ZkOp | undefined, path: string | undefined): void {
  if (op?.op !== 'create' || op.kind !== 'sequential' || path === undefined) return;
  const queue = path.split('/')[1] ?? '';
  ctx
    .queue(queue)
    .listOf(path.slice(0, path.lastIndexOf('/')))
    ?.noteCreated(path);
}

async function makeBucket(q: QueueContext, path: string): Promise<void> {
  await q.ensure();
  await q.listOf(path.slice(0, path.lastIndexOf('/')))?.makeTail();
}

/** Renews held locks; returns the ids this consumer no longer holds. */
export async function extendLocks(
  ctx: StoreContext,
  q: QueueContext,
  consumer: string,
  held: readonly HeldAttempt[],
  lockMs: number,
): Promise<string[]> {
  const lost = await Promise.all(
    held.map(async ({ id, attempt }) => {
      for (let tries = 0; tries < 3; tries++) {
        const h = await heldFor(ctx, q, consumer, id, attempt, tries > 0);
        if (h === null) return id;
        const now = Date.now();
        const state = makeState({ ...h.state, lockUntil: now + lockMs }, now);
        try {
          const stat = await ctx.zk.set(`${h.taskPath}/state`, encodeState(state), h.stateVersion);
          h.stateVersion = stat.version;
          h.state = state;
          return null;
        } catch (error) {
          if (isZkError(error, ZkCode.NoNode)) {
            ctx.dropHeld(q.name, consumer, id, attempt);
            return id;
          }
          if (!isZkError(error, ZkCode.BadVersion)) throw error;
        }
      }
      return id;
    }),
  );
  return lost.filter((id): id is string => id !== null);
}
