/**
 * Claim on finish. A worker's finish frees slots it fills with its very next
 * claim; so the finish multi of a registered consumer also claims, for that
 * consumer and on the terms of its last claim, as many next messages as it
 * finishes: each one an ephemeral `claim` created and `state` set with a
 * version check, exactly as a claim does, in the same atomic multi. The
 * consumer's next claim takes them with no round trip. A message then costs
 * one write round trip instead of two at concurrency 1, and at concurrency N
 * one multi both finishes and claims a whole batch.
 *
 * Only tasks whose reads are already in (sent ahead by an earlier call) and
 * that are pending and ready are taken, oldest first, never more than the
 * finish frees, so a consumer never holds more than its concurrency for
 * longer than a hand-over. A message nobody collects (the worker stopped, or
 * waited too long) is put back as it was before: its claim removed and its
 * state restored, version-checked, so its attempt count does not move.
 */
import { isZkError } from './client.js';
import { encodeState, taskNodes } from './layout.js';
import {
  buildClaim,
  cachedCandidates,
  entryMatches,
  readAheadCount,
  readAheadOf,
  recordClaim,
  type Candidate,
  type PreparedClaim,
} from './claim-build.js';
import type { ConsumerTerms, Handoff, TaskRead } from './claim-cache.js';
import type { StoreContext } from './context.js';
import type { QueueContext } from './queue.js';
import type { ClaimRequest, ClaimedMessage } from '../contract/contract.js';

/** Handoffs not collected within this long (or a third of the lock) are put back. */
const COLLECT_WITHIN_MS = 5000;

/** Claims to ride on a finish of `finishing` messages by `consumer`, built from cached reads only. */
export function claimsForFinish(
  ctx: StoreContext,
  q: QueueContext,
  consumer: string,
  finishing: number,
  now: number,
  /** The highest priority number the claims may take (messages the finish queues again come first). */
  upTo = Infinity,
): PreparedClaim[] {
  const cache = ctx.claims;
  const terms = termsToClaimAhead(ctx, q, consumer);
  if (terms === undefined) return [];
  const room = finishing - cache.handoffsOf(q.name, consumer).length;
  // Only on a configuration read through a live watch, and not while paused; the claim checks its version.
  const conf = q.peekConf();
  if (room <= 0 || conf === null || conf.config.paused || !q.confTrusted()) return [];
  // Under a rate limit every claim spends the queue's tat (claim.ts): none is made blind.
  if (conf.config.rateLimit !== null) return [];
  const chosen: { candidate: Candidate; read: TaskRead }[] = [];
  for (const candidate of cachedCandidates(ctx, q, terms.accepts, room, now)) {
    if (candidate.priority > upTo) break;
    const path = candidate.entry.path;
    const read = cache.settled(path);
    // Oldest first: stop at the first candidate that cannot be claimed blind, rather than skip it.
    if (read === undefined || read === null || cache.suspect.has(path)) break;
    const state = read.state;
    if (state.phase !== 'pending' || state.readyAt > now || !entryMatches(state, candidate.entry)) break;
    // A grouped message needs its group's count and rate checked (claim.ts): not claimed blind.
    const { groupConcurrency, groupRateLimit } = conf.config;
    if (state.group !== undefined && (groupConcurrency !== null || groupRateLimit !== null)) break;
    chosen.push({ candidate, read });
    cache.trying.add(path);
  }
  // They share the finish's one multi: the checks of the last (lowest) level's claim, which cover the levels
  // above every other's, guard them all, so only that claim carries them.
  return chosen.map(({ candidate, read }, k) =>
    buildClaim(
      q,
      k === chosen.length - 1 ? candidate : { ...candidate, checks: [] },
      read,
      consumer,
      terms.lockMs,
      now,
      null,
      conf,
    ),
  );
}

/** After a finish's multi went out: the reads for the claims after the next ones (see readAheadCount). */
export function readAheadAfterFinish(ctx: StoreContext, q: QueueContext, consumer: string, finishing: number): void {
  const terms = termsToClaimAhead(ctx, q, consumer);
  if (terms !== undefined) readAheadOf(ctx, q, terms.accepts, readAheadCount(finishing));
}

/** Only a consumer that claims through this session and is registered (a worker) claims ahead. */
function termsToClaimAhead(ctx: StoreContext, q: QueueContext, consumer: string): ConsumerTerms | undefined {
  const terms = ctx.claims.termsOf(q.name, consumer);
  if (terms === undefined || terms.epoch !== ctx.zk.epoch || ctx.currentPath(q.name, consumer) === null) return;
  return ctx.claims.claimAheadPaused(q.name, consumer) ? undefined : terms;
}

/** The finish multi succeeded: its claims wait for the consumer's next claim. */
export function recordHandoffs(
  ctx: StoreContext,
  q: QueueContext,
  consumer: string,
  claims: readonly { claim: PreparedClaim; stateVersion: number | undefined }[],
  epoch: number,
): void {
  if (claims.length === 0) return;
  const at = Date.now();
  const handoffs = claims.map(({ claim, stateVersion }): Handoff => ({
    message: recordClaim(ctx, q, claim, stateVersion, epoch),
    entryPath: claim.candidate.entry.path,
    previous: claim.read.state,
    lockUntil: claim.next.lockUntil,
    epoch,
    at,
  }));
  ctx.claims.addHandoffs(q.name, consumer, handoffs);
  const lockMs = (claims[0]?.claim.next.lockUntil ?? at) - at;
  const timer = setTimeout(
    () => {
      putBackUncollected(ctx, q, consumer, at).catch(() => undefined);
    },
    Math.min(COLLECT_WITHIN_MS, Math.max(1, lockMs / 3)),
  );
  timer.unref();
}

/** The consumer's handoffs for its claim (at most `max`); any no longer safe to hand over are put back. */
export async function collectHandoffs(
  ctx: StoreContext,
  q: QueueContext,
  request: ClaimRequest,
  now: number,
): Promise<ClaimedMessage[]> {
  const taken = ctx.claims.takeHandoffs(q.name, request.consumerId, request.max);
  if (taken.length === 0) return [];
  const good: Handoff[] = [];
  const stale: Handoff[] = [];
  for (const h of taken) {
    const fine =
      h.epoch === ctx.zk.epoch &&
      h.lockUntil - now >= request.lockMs / 2 &&
      ctx.getHeld(q.name, request.consumerId, h.message.id) !== undefined;
    (fine ? good : stale).push(h);
  }
  await putBack(ctx, q, request.consumerId, stale);
  // Locked by an earlier finish: what is left of the lock at this claim's `now`, read after the claim was made.
  return good.map((h) => ({ ...h.message, lockLeftMs: h.lockUntil - now }));
}

/** Puts back every handoff of a consumer that goes away. */
export async function putBackAll(ctx: StoreContext, q: QueueContext, consumer: string): Promise<void> {
  await putBack(ctx, q, consumer, ctx.claims.takeHandoffs(q.name, consumer, Infinity));
}

/** Handoffs made at or before `at` that no claim collected: put back. */
async function putBackUncollected(ctx: StoreContext, q: QueueContext, consumer: string, at: number): Promise<void> {
  const all = ctx.claims.takeHandoffs(q.name, consumer, Infinity);
  ctx.claims.addHandoffs(
    q.name,
    consumer,
    all.filter((h) => h.at > at),
  );
  await putBack(
    ctx,
    q,
    consumer,
    all.filter((h) => h.at <= at),
  );
}

/**
 * Undoes handoffs: remove the claim and restore the state as it was before,
 * with the version the claim wrote, so a message someone else has since
 * taken over is left alone. One lost with its session needs nothing.
 */
async function putBack(
  ctx: StoreContext,
  q: QueueContext,
  consumer: string,
  handoffs: readonly Handoff[],
): Promise<void> {
  await Promise.all(
    handoffs.map(async (h) => {
      const held = ctx.getHeld(q.name, consumer, h.message.id);
      ctx.dropHeld(q.name, consumer, h.message.id, h.message.attempt);
      ctx.claims.forgetEntry(h.entryPath);
      if (held === undefined) return;
      const nodes = taskNodes(held.taskPath);
      try {
        await ctx.zk.multi([
          { op: 'remove', path: nodes.claim, version: -1 },
          { op: 'set', path: nodes.state, data: encodeState(h.previous), version: held.stateVersion },
        ]);
      } catch (error) {
        if (!isZkError(error)) throw error;
      }
    }),
  );
}
