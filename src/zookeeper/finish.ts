/**
 * Finish and extend. A finish is one multi that removes the consumer's
 * ephemeral claim and writes `state` with the version the claim (or the last
 * extend) wrote: if the session died, the claim is gone and the multi fails;
 * if another consumer took the message over, the version moved and it fails.
 * Either way the late outcome is refused ('lost') and changes nothing.
 * A batch of finishes is one multi; a conflict sends each through alone.
 */
import { releaseOps } from './group-paths.js';
import { claimFailed } from './claim-build.js';
import { isZkError, ZkCode, type ZkOp } from './client.js';
import { claimsForFinish, readAheadAfterFinish, recordHandoffs } from './handoff.js';
import { decodeState, encodeState, entryPrefix, makeState, priorityOf, taskNodes } from './layout.js';
import { endInFailure, failedState, isDeadLetterClash, withHistory } from './fail.js';
import { appendHistory } from '../model/history.js';
import { resultInRecord } from '../model/result.js';
import { finishEventText } from '../store/finish-event-text.js';
import type { Held, StoreContext } from './context.js';
import type { QueueContext } from './queue.js';
import type { EventRecord } from './events.js';
import type { Finish, FinishResult } from '../store/contract.js';
import type { QueueEventType } from '../model/events.js';
import type { Outcome } from '../model/types.js';

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

export async function finishMessages(
  ctx: StoreContext,
  q: QueueContext,
  consumer: string,
  finishes: readonly Finish[],
): Promise<FinishResult[]> {
  const results = new Array<FinishResult>(finishes.length).fill('lost');
  let pending: { index: number; held: Held }[] = [];
  for (const [index, f] of finishes.entries()) {
    const held = await heldFor(ctx, q, consumer, f.id, f.attempt);
    if (held !== null) pending.push({ index, held });
  }
  let claimAhead = true;
  // Ids taken in the dead-letter queue: those fail in place.
  const clashes = new Set<string>();
  // One multi for them all; a failure names the message at fault, which goes alone (or is lost).
  for (let tries = 0; pending.length > 0 && tries < 3 * finishes.length + 3; tries++) {
    const dlqs = new Set<string>();
    const config = await q.eventsConfig();
    const finished = await Promise.all(
      pending.map((p) => finishOps(ctx, q, p.held, finishes[p.index] as Finish, !clashes.has(p.held.id), dlqs)),
    );
    const built = finished.map((f) => f.ops);
    // The done list's (or a sub-queue's) next bucket, when the last one filled up, is made in the same multi.
    const bucketOps = q.bucketCreates(built.flat());
    const newBuckets = bucketOps.map((op) => op.path);
    const ops: ZkOp[] = [...bucketOps, ...built.flat()];
    const owner = [...bucketOps.map(() => undefined), ...built.flatMap((list, k) => list.map(() => k))];
    // The slots these finishes free are filled in the same multi (see handoff.ts).
    // Messages this finish queues again come before any lower priority the claims ahead could take.
    const requeued = pending.filter((p) => finishes[p.index]?.outcome === 'retry' || p.held.state.requeue);
    const upTo = Math.min(Infinity, ...requeued.map((p) => priorityOf(p.held.state)));
    const claims = claimAhead ? claimsForFinish(ctx, q, consumer, pending.length, Date.now(), upTo) : [];
    const claimsFrom = ops.length;
    const offsets = claims.map((c) => ops.push(...c.ops) - c.ops.length);
    const claimsTo = ops.length;
    const current = ctx.currentPath(q.name, consumer);
    if (current !== null) {
      const without = pending.map((p) => p.held.id);
      const extra = claims.map((c) => c.candidate.entry.id);
      ops.push({ op: 'set', path: current, data: ctx.currentData(q.name, consumer, extra, without), version: -1 });
    }
    // Every event of this multi in one node: the finishes' and the claims' riding on them.
    ops.push(...q.events.ops(config, [...finished.flatMap((f) => f.events), ...claims.map((c) => c.event)]));
    const epoch = ctx.zk.epoch;
    try {
      const committing = ctx.zk.multi(ops);
      if (claimAhead) readAheadAfterFinish(ctx, q, consumer, pending.length);
      const created = await committing;
      q.noteBucketsMade(newBuckets);
      created.forEach((r, k) => notePath(ctx, ops[k], r.path));
      for (const p of pending) {
        results[p.index] = 'ok';
        ctx.dropHeld(q.name, consumer, p.held.id);
        // The entry is gone: no claim of this process need look at it again.
        ctx.claims.forgetEntry(p.held.entryPath);
        q.listOf(p.held.entryPath)?.forgetPath(p.held.entryPath);
      }
      recordHandoffs(
        ctx,
        q,
        consumer,
        claims.map((claim, k) => ({ claim, stateVersion: created[(offsets[k] ?? 0) + claim.stateOp]?.version })),
        epoch,
      );
      if (pending.some((p) => finishes[p.index]?.outcome === 'retry' || p.held.state.requeue)) {
        ctx.wakeups.notify(q.name);
      }
      for (const dlq of dlqs) ctx.wakeups.notify(dlq);
      return results;
    } catch (error) {
      if (!isZkError(error) || error.opIndex < 0) throw error;
      if (error.opIndex >= claimsFrom && error.opIndex < claimsTo) {
        // A claim riding along lost a race: finish alone, and leave claiming to the next claim.
        const k = offsets.findLastIndex((at) => at <= error.opIndex);
        const failed = claims[k];
        if (failed !== undefined) claimFailed(ctx, q, failed, error.code, error.opIndex - (offsets[k] ?? 0));
        // Others take from the same place: give them a moment before riding claims on finishes again.
        ctx.claims.pauseClaimAhead(q.name, consumer, CLAIM_AHEAD_PAUSE_MS);
        claimAhead = false;
        continue;
      }
      const failedOp = ops[error.opIndex];
      if (isDeadLetterClash(q, error.code, failedOp)) {
        const k = owner[error.opIndex];
        const culprit = k === undefined ? undefined : pending[k];
        if (culprit === undefined) throw error;
        clashes.add(culprit.held.id);
        continue;
      }
      if (error.code === ZkCode.NodeExists && failedOp !== undefined && newBuckets.includes(failedOp.path)) {
        // Another writer made that bucket first.
        q.noteBucketsMade([failedOp.path]);
        continue;
      }
      if (error.code === ZkCode.NoNode && failedOp?.op === 'create') {
        // The sub-queue or done bucket to write to is missing: make it, try again.
        await makeBucket(q, failedOp.path);
        continue;
      }
      if (failedOp?.path === current) {
        ctx.registered.delete(`${q.name}\u0000${consumer}`);
        continue;
      }
      const k = owner[error.opIndex];
      const culprit = k === undefined ? undefined : pending[k];
      if (culprit === undefined) throw error;
      // Look again at the culprit: still ours (the state changed, e.g. a requeue mark), or lost.
      const again = await heldFor(ctx, q, consumer, culprit.held.id, culprit.held.attempt, true);
      pending = pending.filter((p) => p !== culprit);
      if (again !== null) pending.push({ index: culprit.index, held: again });
    } finally {
      for (const c of claims) ctx.claims.trying.delete(c.candidate.entry.path);
    }
  }
  return results;
}

/** The claim as this store holds it; re-read from the server when missing or stale (`reread`). */
export async function heldFor(
  ctx: StoreContext,
  q: QueueContext,
  consumer: string,
  id: string,
  attempt: number,
  reread = false,
): Promise<Held | null> {
  const known = ctx.getHeld(q.name, consumer, id);
  if (known !== undefined && known.attempt === attempt && !reread) return known;
  const nodes = taskNodes(q.paths.task(id));
  try {
    const [read, claim] = await Promise.all([ctx.zk.get(nodes.state), ctx.zk.exists(nodes.claim)]);
    const state = decodeState(nodes.state, read.data);
    const ours =
      state.phase === 'locked' &&
      state.consumer === consumer &&
      state.attempt === attempt &&
      claim !== null &&
      claim.ephemeralOwner === ctx.zk.sessionId &&
      known !== undefined &&
      known.epoch === ctx.zk.epoch;
    if (!ours) {
      ctx.dropHeld(q.name, consumer, id);
      return null;
    }
    const held: Held = { ...known, stateVersion: read.stat.version, state };
    ctx.setHeld(held);
    return held;
  } catch (error) {
    if (isZkError(error, ZkCode.NoNode)) {
      ctx.dropHeld(q.name, consumer, id);
      return null;
    }
    throw error;
  }
}

/** `deadLetter`: a failure may move to the dead-letter queue; `dlqs` gathers the queues moved to. */
async function finishOps(
  ctx: StoreContext,
  q: QueueContext,
  held: Held,
  f: Finish,
  deadLetter: boolean,
  dlqs: Set<string>,
): Promise<{ ops: ZkOp[]; events: EventRecord[] }> {
  const now = Date.now();
  const s = held.state;
  const nodes = taskNodes(held.taskPath);
  const ops: ZkOp[] = [{ op: 'remove', path: nodes.claim, version: -1 }, ...releaseOps(q, held.id, s)];
  const requeued = f.outcome !== 'retry' && s.requeue;
  // A run handed back unrun (startedAt null) is no outcome: no event.
  const event: EventRecord[] =
    f.startedAt === null
      ? []
      : [
          {
            type: EVENT_OF_OUTCOME[f.outcome],
            id: held.id,
            attempt: s.attempt,
            at: now,
            error: finishEventText(f),
          },
        ];
  // A run handed back unrun (startedAt null) leaves no record; a success leaves none either.
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
  if (f.outcome === 'retry' || requeued) {
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
    ops.push({ op: 'set', path: nodes.state, data: encodeState(next), version: held.stateVersion });
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
    return { ops, events: event };
  }
  if (f.outcome === 'error') {
    const failed = failedState(s, now, f.error, history);
    const ended = await endInFailure(ctx, q, held.id, failed, held.stateVersion, held.entryPath, deadLetter);
    if (ended.dlq !== null) dlqs.add(ended.dlq);
    return { ops: [...ops, ...ended.ops], events: f.startedAt === null ? [] : [ended.event] };
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
      // Kept in the state written anyway: no node, no op more.
      ...(f.result === undefined ? {} : resultInRecord(f.result)),
    },
    now,
  );
  ops.push({ op: 'set', path: nodes.state, data: encodeState(done), version: held.stateVersion });
  ops.push({ op: 'remove', path: held.entryPath, version: -1 });
  ops.push({ op: 'create', path: prefix, kind: 'sequential' });
  ops.push(...(await q.waitingOps(held.id, done.backoffUntil, now)));
  return { ops, events: event };
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
  held: readonly { id: string; attempt: number }[],
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
            ctx.dropHeld(q.name, consumer, id);
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
