/**
 * Claim: walk the sub-queues the consumer accepts (never one its filters
 * exclude), oldest entries first, from cached bucket listings; for each
 * candidate read its state, then in one multi create the ephemeral `claim`
 * and write `state` with a version check. The entry stays in the queue while
 * the message is locked, so a dead session (its claim vanishes) or an expired
 * lock (lockUntil passed) frees it with no one else's help.
 *
 * Round trips: the queue's shape comes from views kept by watches (nothing is
 * read while nothing changed); the reads of the next candidates are sent
 * ahead while this claim's multis are in flight; the multis of one claim go
 * out together; and messages the consumer's last finish already claimed for
 * it (handoff.ts) are handed over with no round trip at all.
 */
import { isZkError, ZkCode, type ZkOp } from './client.js';
import { deriveState, taskNodes, type Entry, type TaskState } from './layout.js';
import { collectHandoffs, putBackAll } from './handoff.js';
import {
  aboveChecks,
  buildClaim,
  byEntry,
  claimFailed,
  priorityLevels,
  entryMatches,
  readAheadCount,
  readAheadOf,
  recordClaim,
  skipUntil,
  type Candidate,
  type PreparedClaim,
  walkOrder,
} from './claim-build.js';
import { commitIndexed } from './actions.js';
import { planGroups } from './groups.js';
import { planGroupRates } from './group-rates.js';
import { chargeOp, readRate } from './rate.js';
import { rateGrant } from '../../model/rate-limit.js';
import { releaseOps } from './group-paths.js';
import { endInFailure, failedState, isDeadLetterClash } from './fail.js';
import { FlowEnds } from './flow-ends.js';
import { appendHistory, maxDeliveriesError } from '../../model/history.js';
import type { ConfRead } from './conf.js';
import { parseCounters, type QueueContext } from './queue.js';
import type { BucketedList } from './buckets.js';
import type { ClaimCache, TaskRead } from './claim-cache.js';
import type { StoreContext } from './context.js';
import type { ClaimRequest, ClaimResult, ClaimedMessage } from '../contract/contract.js';
import type { AttemptRecord, RateLimit } from '../../model/types.js';

/** A paused queue's claims say to look again this soon. */
const PAUSED_WAKE_MS = 1000;
/** Rounds of one claim that look past entries of full groups, or again after a higher priority got messages. */
const MAX_GROUP_ROUNDS = 8;
/** A claim lost to messages added to a higher priority since its candidates were chosen. */
const RESCAN = 'rescan';

export async function claimMessages(ctx: StoreContext, q: QueueContext, request: ClaimRequest): Promise<ClaimResult> {
  const cache = ctx.claims;
  await q.ensure();
  const now = Date.now();
  cache.noteTerms(q.name, request.consumerId, {
    accepts: request.accepts,
    lockMs: request.lockMs,
    epoch: ctx.zk.epoch,
  });
  const readAhead = readAheadCount(request.max);
  const conf = await q.confView();
  if (conf.config.paused) {
    // Paused: nothing is taken (messages a finish claimed ahead go back), no dry run is counted,
    // and a worker looks again within a second (a resume also wakes it).
    await putBackAll(ctx, q, request.consumerId);
    const queueSize = cache.queueSizes.get(q.name) ?? 0;
    return { messages: [], queueSize, dryRuns: q.peekView()?.counters.dryRuns ?? 0, wakeAt: now + PAUSED_WAKE_MS };
  }
  const handed = await collectHandoffs(ctx, q, request, now);
  if (handed.length >= request.max) {
    // Keep the reads flowing, so the next finish can claim again.
    readAheadOf(ctx, q, request.accepts, readAhead);
    await resetCounters(ctx, q);
    return { messages: handed, queueSize: cache.queueSizes.get(q.name) ?? handed.length, dryRuns: 0, wakeAt: null };
  }
  const max = request.max - handed.length;

  if (cache.blockedAt.get(q.name) !== conf.version) {
    // groupConcurrency may have changed: entries skipped for a full group are looked at again.
    cache.unblockAll();
    cache.blockedAt.set(q.name, conf.version);
  }
  const messages: ClaimedMessage[] = [...handed];
  let wakeAt = Infinity;
  let queueSize = 0;
  const limit = conf.config.rateLimit;
  // When the rate limit allows nothing now: the next slot.
  let rateWake: number | null = null;
  // When the first message this claim passed over for its group's rate may start.
  let groupRateWake = Infinity;
  // Whether the last round lost to messages new in a higher priority: they are looked at first.
  let rescan = false;
  // A round that skipped entries of a full group looks again past them (they are skipped from then on).
  for (let round = 0; ; round++) {
    rescan = false;
    const scan = await scanCandidates(ctx, q, request, max - (messages.length - handed.length) + readAhead, now);
    wakeAt = Math.min(wakeAt, scan.wakeAt);
    queueSize = scan.queueSize;
    const { candidates } = scan;
    let blocked = 0;
    let next = 0;
    while (messages.length < request.max && next < candidates.length) {
      const rate = await rateBatch(ctx, q, limit, request.max - messages.length);
      if (rate.wakeAt !== null) {
        rateWake = rate.wakeAt;
        break;
      }
      const batch = candidates.slice(next, next + rate.size);
      next += batch.length;
      const upcoming = candidates.slice(next, next + readAhead);
      const done = await claimBatch(ctx, q, request, conf, batch, upcoming, rate.charge, now);
      messages.push(...done.messages);
      blocked += done.blocked;
      wakeAt = Math.min(wakeAt, done.wakeAt);
      groupRateWake = Math.min(groupRateWake, done.rateWake);
      if (done.rescan) {
        // The candidates left are of lower priorities than messages just added: choose again.
        rescan = true;
        break;
      }
    }
    const again = blocked > 0 || rescan;
    if (rateWake !== null || messages.length >= request.max || !again || round >= MAX_GROUP_ROUNDS) break;
  }
  cache.queueSizes.set(q.name, queueSize);
  if (messages.length === 0 && rateWake !== null) {
    // Held back by the rate limit, not an empty queue: no dry run; look again at the next slot.
    return { messages, queueSize, dryRuns: q.peekView()?.counters.dryRuns ?? 0, wakeAt: rateWake };
  }
  if (messages.length === 0 && rescan) {
    // Every round lost to new messages of a higher priority: not an empty queue; look again at once.
    return { messages, queueSize, dryRuns: q.peekView()?.counters.dryRuns ?? 0, wakeAt: Date.now() };
  }
  const groupWait = groupRateWait(cache, q.name, groupRateWake, now);
  if (messages.length === 0 && groupWait !== null) {
    // Only messages of groups waiting for their rate: no dry run; look again at the first one's time.
    return { messages, queueSize, dryRuns: q.peekView()?.counters.dryRuns ?? 0, wakeAt: Math.min(wakeAt, groupWait) };
  }

  if (messages.length > 0) {
    await resetCounters(ctx, q);
    return { messages, queueSize, dryRuns: 0, wakeAt: null };
  }
  return { messages, queueSize, ...(await dryRun(ctx, q, request, wakeAt)) };
}

/**
 * When the first group whose messages wait for its rate may start one, or null: what this claim passed over, or
 * what an earlier claim did (later claims skip those messages, yet they are no empty queue either).
 */
function groupRateWait(cache: ClaimCache, queue: string, passedOver: number, now: number): number | null {
  const known = cache.groupRateWaits.get(queue);
  const first = Math.min(passedOver, known !== undefined && known > now ? known : Infinity);
  if (first === Infinity) {
    cache.groupRateWaits.delete(queue);
    return null;
  }
  cache.groupRateWaits.set(queue, first);
  return first;
}

/** What the rate limit lets a batch of up to `size` claims take: how many, the op charging the k-th, or when. */
async function rateBatch(
  ctx: StoreContext,
  q: QueueContext,
  limit: RateLimit | null,
  size: number,
): Promise<{ size: number; charge: ((k: number) => ZkOp) | null; wakeAt: number | null }> {
  if (limit === null) return { size, charge: null, wakeAt: null };
  // The rate limit's tat, read afresh for each batch: its claims spend it in order.
  const rate = await readRate(ctx.zk, q.paths);
  const grant = rateGrant(limit, rate.tat, Date.now(), size);
  if (grant.granted === 0) return { size: 0, charge: null, wakeAt: grant.wakeAt };
  return { size: grant.granted, charge: (k) => chargeOp(q.paths, limit, grant, rate, k), wakeAt: null };
}

/**
 * Claims a batch: reads (or takes the reads sent ahead of) each candidate, drops those of full groups, and sends
 * one multi per message, together; meanwhile the reads of the `upcoming` candidates go out.
 */
async function claimBatch(
  ctx: StoreContext,
  q: QueueContext,
  request: ClaimRequest,
  conf: ConfRead,
  batch: readonly Candidate[],
  upcoming: readonly Candidate[],
  charge: ((k: number) => ZkOp) | null,
  now: number,
): Promise<{ messages: ClaimedMessage[]; blocked: number; rateWake: number; wakeAt: number; rescan: boolean }> {
  const cache = ctx.claims;
  let wakeAt = Infinity;
  for (const c of batch) cache.trying.add(c.entry.path);
  try {
    const prepared = await Promise.all(batch.map((c) => prepare(ctx, cache, q, c, request, conf, now)));
    const ready = prepared.filter((p): p is PreparedClaim => typeof p === 'object' && p !== null);
    for (const p of prepared) if (typeof p === 'number') wakeAt = Math.min(wakeAt, p);
    // The groups' rates first: dropping a claim after planGroups would break its group's chain of versions.
    const rated = await planGroupRates(ctx, q, ready, conf.config.groupRateLimit);
    wakeAt = Math.min(wakeAt, rated.wakeAt);
    const claims = await planGroups(ctx, q, rated.kept, conf.config.groupConcurrency);
    if (charge !== null) claims.forEach((p, k) => p.ops.push(charge(k)));
    // One write of the consumer's `current` (what it holds) rides on the last multi.
    const current = ctx.currentPath(q.name, request.consumerId);
    const last = claims[claims.length - 1];
    if (current !== null && last !== undefined) {
      last.ops.push({
        op: 'set',
        path: current,
        data: ctx.currentData(
          q.name,
          request.consumerId,
          claims.map((c) => c.candidate.entry.id),
        ),
        version: -1,
      });
    }
    const committing = Promise.all(claims.map((p) => commit(ctx, q, p, current, conf)));
    // While this batch is taken, the reads of the next ones are on their way.
    cache.readAhead(
      ctx.zk,
      upcoming.map((c) => ({ entry: c.entry, taskPath: q.paths.task(c.entry.id) })),
    );
    const outcomes = await committing;
    const messages = outcomes.filter((m): m is ClaimedMessage => m !== null && m !== RESCAN);
    const blocked = ready.length - claims.length;
    return { messages, blocked, rateWake: rated.wakeAt, wakeAt, rescan: outcomes.includes(RESCAN) };
  } finally {
    for (const c of batch) cache.trying.delete(c.entry.path);
  }
}

/**
 * The entries to try, in claim order: priority levels in order (the view is sorted by priority), a level read
 * only while the ones before it held fewer than `want` claimable entries, so a claim never reads lower
 * priorities to find higher ones. Also the queue's size and when a skipped entry becomes claimable.
 */
async function scanCandidates(
  ctx: StoreContext,
  q: QueueContext,
  request: ClaimRequest,
  want: number,
  now: number,
): Promise<{ candidates: Candidate[]; queueSize: number; wakeAt: number }> {
  const cache = ctx.claims;
  const view = await q.queueView();
  const onChange = (): void => ctx.wakeups.notify(q.name);
  let wakeAt = Infinity;
  const candidates: Candidate[] = [];
  let queueSize = 0;
  // The checks of the sub-queues of the levels before, which this consumer takes from (see aboveChecks).
  const unchanged: ZkOp[] = [];
  const subsCheck = q.subsUnchangedOp(view);
  for (const level of priorityLevels(view.subs)) {
    const checks = aboveChecks(unchanged, subsCheck, level[0]?.priority ?? 0);
    const sizes = await Promise.all(
      level.map(async (key) => {
        const sub = q.sub(key.filterClass, key.priority, key.lifo);
        // A sub-queue this consumer never takes from, or a level not needed, is only counted (and not watched).
        if (candidates.length >= want || (request.accepts !== null && !request.accepts(key.filterClass))) {
          return sub.totalSize();
        }
        const { buckets, unchanged: check } = await sub.watchedBuckets(onChange);
        if (check !== null) unchanged.push(check);
        let found = 0;
        for (const bucket of walkOrder(buckets, key.lifo)) {
          const entries = await sub.cached(bucket);
          if (entries.length === 0 && bucket !== buckets[buckets.length - 1]) await sub.dropIfEmpty(bucket);
          for (const entry of entries) {
            if (found >= want) break;
            const until = skipUntil(cache, entry, now);
            if (until === null) {
              candidates.push({ entry, sub, priority: key.priority, checks });
              found += 1;
            } else wakeAt = Math.min(wakeAt, until);
          }
          if (found >= want) break;
        }
        return sub.size(buckets);
      }),
    );
    queueSize += sizes.reduce((a, b) => a + b, 0);
  }
  return { candidates: candidates.sort(byEntry), queueSize, wakeAt };
}

/**
 * Looks at one candidate's task and builds its claim multi. A number when it
 * becomes free later (a backoff or another consumer's lock ends then); null
 * when it is someone else's or gone.
 */
async function prepare(
  ctx: StoreContext,
  cache: ClaimCache,
  q: QueueContext,
  candidate: Candidate,
  request: ClaimRequest,
  conf: ConfRead,
  now: number,
): Promise<PreparedClaim | number | null> {
  const { entry, sub } = candidate;
  const nodes = taskNodes(q.paths.task(entry.id));
  const read = await cache.read(ctx.zk, entry, q.paths.task(entry.id));
  if (
    read === null ||
    read.state.phase === 'done' ||
    read.state.phase === 'failed' ||
    !entryMatches(read.state, entry)
  ) {
    // The task is gone, or moved on (finished, retried): this entry is left over.
    await dropStale(ctx, cache, sub, entry);
    return null;
  }
  const state = read.state;
  if (state.phase === 'pending' && state.readyAt > now) return state.readyAt;
  // A pending task has no claim (a finish removes it in the same multi), so only a locked one needs a look.
  let claimVersion: number | null = null;
  if (state.phase === 'locked' || cache.suspect.has(entry.path)) {
    const claim = await ctx.zk.exists(nodes.claim);
    if (state.phase === 'locked' && deriveState(state, claim !== null, now) !== 'queued') {
      // Held by another consumer: skip it until its lock ends, or its claim goes (a dead session).
      cache.noteLocked(entry.path, state.lockUntil);
      cache.forgetRead(entry.path);
      if (claim !== null) {
        void ctx.wakeups.armClaim(q.name, nodes.claim, () => cache.lockedUntil.delete(entry.path));
      }
      return state.lockUntil;
    }
    claimVersion = claim?.version ?? null;
  }
  if (state.phase !== 'locked') {
    return buildClaim(q, candidate, read, request.consumerId, request.lockMs, now, claimVersion, conf);
  }
  // Its lock ended without a finish (the consumer died or stalled): a lost delivery.
  const losses = (state.losses ?? 0) + 1;
  const history = appendHistory(state.history ?? [], {
    attempt: state.attempt,
    startedAt: null,
    endedAt: now,
    consumer: state.consumer,
    outcome: 'lost',
    error: null,
  });
  const max = conf.config.maxDeliveries;
  if (max === 0 || losses < max) {
    const counted = { ...read, state: { ...state, losses, history } };
    return buildClaim(q, candidate, counted, request.consumerId, request.lockMs, now, claimVersion, conf);
  }
  await failLost(ctx, q, candidate, read, { ...state, losses }, history, claimVersion, now);
  return null;
}

/** A message that lost its lock `maxDeliveries` times is not delivered again: it fails (or is dead-lettered). */
async function failLost(
  ctx: StoreContext,
  q: QueueContext,
  candidate: Candidate,
  read: TaskRead,
  state: TaskState,
  history: readonly AttemptRecord[],
  claimVersion: number | null,
  now: number,
): Promise<void> {
  const { entry, sub } = candidate;
  const failed = failedState(state, now, maxDeliveriesError(state.losses ?? 0), history);
  const claimPath = taskNodes(q.paths.task(entry.id)).claim;
  const removeClaim: ZkOp[] =
    claimVersion === null
      ? []
      : [{ op: 'remove', path: claimPath, version: claimVersion }, ...releaseOps(q, entry.id, read.state)];
  for (const deadLetter of [true, false]) {
    const ended = await endInFailure(ctx, q, entry.id, failed, read.version, entry.path, deadLetter);
    const event = q.events.ops(await q.eventsConfig(), [ended.event]);
    // A flow's child ends for its parent in this multi.
    const flow = new FlowEnds(ctx);
    const paid = state.owes === true ? await flow.childEnded(q, entry.id, state, { error: failed.lastError }) : [];
    const failure = await commitIndexed(ctx, q, [...removeClaim, ...ended.ops, ...event, ...paid]);
    if (failure === null) {
      ctx.claims.forgetEntry(entry.path);
      sub.forget(entry);
      for (const woken of [...flow.wakes, ...(ended.dlq === null ? [] : [ended.dlq])]) ctx.wakeups.notify(woken);
      return;
    }
    // Taken or changed meanwhile: read it afresh next time.
    ctx.claims.forgetRead(entry.path);
    if (!isDeadLetterClash(q, failure.code, failure.op)) return;
  }
}

async function commit(
  ctx: StoreContext,
  q: QueueContext,
  p: PreparedClaim,
  current: string | null,
  conf: ConfRead,
): Promise<ClaimedMessage | typeof RESCAN | null> {
  const epoch = ctx.zk.epoch;
  let results;
  try {
    results = await ctx.zk.multi([...p.ops, ...q.events.ops(conf.config, [p.event])]);
  } catch (error) {
    if (!isZkError(error)) throw error;
    // Someone else took it first (NODE_EXISTS, BAD_VERSION) or it went away: not ours.
    if (claimFailed(ctx, q, p, error.code, error.opIndex)) return RESCAN;
    if (error.code === ZkCode.NoNode && p.ops[error.opIndex]?.path === current) {
      ctx.registered.delete(`${q.name}\u0000${p.consumer}`);
    }
    return null;
  }
  return recordClaim(ctx, q, p, results[p.stateOp]?.version, epoch);
}

/** After a claim: the queue-wide dry-run counters go back to 0 (when the view says they are not). */
async function resetCounters(ctx: StoreContext, q: QueueContext): Promise<void> {
  const counters = q.peekView()?.counters;
  if (counters !== undefined && (counters.dryRuns !== 0 || counters.eoqUntil !== 0)) {
    await ctx.zk.set(q.paths.queue, Buffer.from(JSON.stringify({ dryRuns: 0, eoqUntil: 0 })), -1);
  }
}

/** An entry that no longer matches its task: forget it, delete it, and read its bucket again next time. */
async function dropStale(ctx: StoreContext, cache: ClaimCache, sub: BucketedList, entry: Entry): Promise<void> {
  cache.forgetEntry(entry.path);
  sub.forget(entry);
  sub.markDirty(entry.bucket);
  try {
    await ctx.zk.remove(entry.path, -1);
  } catch (error) {
    if (!isZkError(error, ZkCode.NoNode)) throw error;
  }
}

/**
 * Nothing to take: count a dry run once per queue-wide end-of-queue backoff,
 * and say when to look again anyway. The watches that wake the worker sooner
 * were set by the reads of the queue's view.
 */
async function dryRun(
  ctx: StoreContext,
  q: QueueContext,
  request: ClaimRequest,
  wakeAt: number,
): Promise<{ dryRuns: number; wakeAt: number }> {
  const zk = ctx.zk;
  let dryRuns = 0;
  let eoqUntil = 0;
  for (let tries = 0; tries < 10; tries++) {
    const now = Date.now();
    const { data, stat } = await zk.get(q.paths.queue);
    ({ dryRuns, eoqUntil } = parseCounters(data));
    if (eoqUntil > now) break;
    dryRuns += 1;
    eoqUntil = now + request.eoqBackoffMs(dryRuns);
    try {
      await zk.set(q.paths.queue, Buffer.from(JSON.stringify({ dryRuns, eoqUntil })), stat.version);
      break;
    } catch (error) {
      // Another worker counted this dry run: read what it wrote.
      if (!isZkError(error, ZkCode.BadVersion)) throw error;
    }
  }
  return { dryRuns, wakeAt: Math.min(wakeAt, eoqUntil) };
}
