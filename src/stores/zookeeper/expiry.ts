/**
 * The GC's sweep of pending messages whose time to live ended (EnqueueOptions.expireAfterMs): it walks the
 * `/expiry` entries due (made with the message's enqueue, `<expireAt>-<task>-<seq>`) and fails each message
 * still pending and never delivered with the error `expired` (or moves it to the dead-letter queue), its
 * queue entry removed in the same multi, checked against the state's version. Every due entry goes but a flow
 * parent's that still waits for its children: it expires once queued, at a GC after that.
 */
import { commitIndexed, resolveEntry } from './actions.js';
import { endInFailure, failedState, isDeadLetterClash } from './fail.js';
import { removeAll } from './tree.js';
import { decodeState, taskNodes, type Entry } from './layout.js';
import { decodePolicy, EXPIRED_ERROR, expired } from '../../model/policy.js';
import { FlowEnds } from './flow-ends.js';
import type { ZkOp } from './client.js';
import type { StoreContext } from './context.js';
import type { QueueContext } from './queue.js';

const TRIES = 5;

/** Fails the waiting messages past their deadline; returns how many. */
export async function expireWaiting(ctx: StoreContext, q: QueueContext): Promise<number> {
  const buckets = await q.expiring.buckets();
  let failed = 0;
  for (const [i, bucket] of buckets.entries()) {
    const entries = await q.expiring.list(bucket);
    const now = Date.now();
    const due: Entry[] = [];
    for (const entry of entries) {
      if (entry.at > now) continue;
      const outcome = await expireOne(ctx, q, entry, now);
      if (outcome === 'expired') failed += 1;
      if (outcome !== 'waits') due.push(entry);
    }
    // Entries another GC took first are gone already.
    await removeAll(
      ctx.zk,
      due.map((e) => e.path),
    );
    for (const e of due) q.expiring.forget(e);
    if (due.length === entries.length && i < buckets.length - 1) await q.expiring.dropIfEmpty(bucket);
  }
  return failed;
}

/**
 * Fails the entry's message when it still waits, never delivered, past its deadline (`expired`); `waits` for a
 * flow parent still waiting for its children (its entry stays); else `no`.
 */
async function expireOne(
  ctx: StoreContext,
  q: QueueContext,
  entry: Entry,
  now: number,
): Promise<'expired' | 'waits' | 'no'> {
  let deadLetter = true;
  for (let tries = 0; tries < TRIES; tries++) {
    const [read] = await ctx.zk.getMany([taskNodes(q.paths.task(entry.id)).state]);
    if (read == null) return 'no';
    const state = decodeState(q.paths.task(entry.id), read.data);
    if (state.phase === 'waiting') return 'waits';
    if (state.phase !== 'pending' || state.attempt !== 0 || !expired(decodePolicy(state.policy), now)) return 'no';
    const failed = failedState(state, now, EXPIRED_ERROR, state.history);
    // The state keeps its queue entry's prefix: the entry's full path has the sequence number.
    const queueEntry = await resolveEntry(ctx.zk, state.entry);
    const ended = await endInFailure(ctx, q, entry.id, failed, read.version, queueEntry, deadLetter);
    const events: ZkOp[] = q.events.ops(await q.eventsConfig(), [ended.event]);
    // A flow's child ends for its parent in this multi.
    const flow = new FlowEnds(ctx);
    const paid = state.owes === true ? await flow.childEnded(q, entry.id, state, { error: EXPIRED_ERROR }) : [];
    const failure = await commitIndexed(ctx, q, [...ended.ops, ...events, ...paid]);
    if (failure === null) {
      for (const woken of [...flow.wakes, ...(ended.dlq === null ? [] : [ended.dlq])]) ctx.wakeups.notify(woken);
      return 'expired';
    }
    // A clash in the dead-letter queue fails it here; a flow parent written meanwhile is read again; otherwise it
    // was delivered or changed meanwhile, and stays.
    if (isDeadLetterClash(q, failure.code, failure.op)) deadLetter = false;
    else if (failure.op === undefined || !flow.parentPaths.has(failure.op.path)) return 'no';
  }
  return 'no';
}
