/**
 * The pieces of a claim shared by claim.ts and by the claims a finish makes
 * for its consumer (handoff.ts): choosing candidates from cached listings,
 * sending their reads ahead, building a claim's multi and recording its
 * outcome. A leaf below both, so neither imports the other's module.
 */
import { parseFilterClass } from '../../model/filters.js';
import { ZkCode, type ZkOp } from './client.js';
import {
  compareEntries,
  encodeState,
  makeState,
  namesEntry,
  taskNodes,
  type Entry,
  type SubKey,
  type TaskState,
} from './layout.js';
import { releaseOps } from './group-paths.js';
import type { ConfRead } from './conf.js';
import type { EventRecord } from './events.js';
import type { QueueContext } from './queue.js';
import type { BucketedList } from './buckets.js';
import type { ClaimCache, TaskRead } from './claim-cache.js';
import type { StoreContext } from './context.js';
import type { ClaimedMessage } from '../contract/contract.js';
import type { Metadata } from '../../model/types.js';

export interface Candidate {
  readonly entry: Entry;
  readonly sub: BucketedList;
  /** The priority of its sub-queue: candidates are taken lowest number first. */
  readonly priority: number;
  /**
   * What its multi checks so that no message enqueued before the claim is passed over: that the sub-queues of
   * higher priorities (lower numbers) the consumer takes from got no messages since the listings it was chosen
   * from (their versions as of then), and, below priority 0, that no sub-queue was made since the view those
   * listings came from (a priority new to the queue, or one made again after a clear: aboveChecks).
   */
  readonly checks: readonly ZkOp[];
}

/** A claim ready to send: its operations, and what to remember once they succeed. */
export interface PreparedClaim {
  readonly candidate: Candidate;
  readonly ops: ZkOp[];
  /** Index in `ops` of the `state` write and of the `claim` create. */
  readonly stateOp: number;
  readonly createOp: number;
  readonly read: TaskRead;
  readonly next: TaskState;
  readonly consumer: string;
  /** Its `started` event, for the multi that commits it (with the others of that multi). */
  readonly event: EventRecord;
}

const MAX_READ_AHEAD = 192;

/**
 * How many candidates past those being claimed get their reads sent ahead:
 * three claims' worth. Reads are sent after the multis of the claim or finish
 * under way (ZooKeeper answers a session's requests in order: sent before,
 * they would delay the multi), so they come in while the worker runs its
 * handlers; the next claims use reads sent one or two rounds earlier.
 */
export function readAheadCount(max: number): number {
  return Math.min(3 * max, MAX_READ_AHEAD);
}

/** Sends the reads of the next `n` candidates this process knows of (see readAheadCount). */
export function readAheadOf(
  ctx: StoreContext,
  q: QueueContext,
  accepts: ((filterClass: string) => boolean) | null,
  n: number,
): void {
  const next = cachedCandidates(ctx, q, accepts, n, Date.now());
  ctx.claims.readAhead(
    ctx.zk,
    next.map((c) => ({ entry: c.entry, taskPath: q.paths.task(c.entry.id) })),
  );
}

/** Null when the entry may be claimed now; else when to look again (a backoff or a known lock ends). */
export function skipUntil(cache: ClaimCache, entry: Entry, now: number): number | null {
  if (entry.at > now) return entry.at;
  const until = cache.lockedUntil.get(entry.path);
  if (until !== undefined && until > now) return until;
  // Its group is full: a removal in the group (its watch) says when to look again.
  if (cache.blocked.has(entry.path)) return Infinity;
  // Its group waits for its rate (group-rates.ts).
  const rate = cache.rateSkips.get(entry.path);
  if (rate !== undefined && rate > now) return rate;
  return cache.trying.has(entry.path) ? Infinity : null;
}

/**
 * The checks of a candidate of `priority`: `unchanged`, one per sub-queue of a higher level it was chosen past
 * (each taken when that sub-queue's listings were, since a later listing may move its version), and the view's
 * check that no sub-queue was made since; priority 0 has nothing above it.
 */
export function aboveChecks(unchanged: readonly ZkOp[], subsCheck: ZkOp | null, priority: number): ZkOp[] {
  return priority > 0 && subsCheck !== null ? [...unchanged, subsCheck] : [...unchanged];
}

/** The sub-queues grouped by priority, lowest number (runs first) first; `subs` is sorted by priority. */
export function priorityLevels(subs: readonly SubKey[]): SubKey[][] {
  const levels: SubKey[][] = [];
  let last: SubKey[] | undefined;
  for (const key of subs) {
    if (last?.[0]?.priority === key.priority) last.push(key);
    else {
      last = [key];
      levels.push(last);
    }
  }
  return levels;
}

/** Claim order: priority, then oldest ready first (FIFO among equal times; LIFO entries of one time newest first). */
export function byEntry(a: Candidate, b: Candidate): number {
  return a.priority - b.priority || compareEntries(a.entry, b.entry);
}

/** A sub-queue's buckets in the order a claim walks them: a LIFO sub-queue's newest first. */
export function walkOrder(buckets: readonly string[], lifo: boolean): readonly string[] {
  return lifo ? [...buckets].reverse() : buckets;
}

/**
 * The next `n` entries a consumer with `accepts` may claim, from what this
 * process already knows (trusted views and listings); reads nothing. A
 * sub-queue whose view is out of date contributes nothing.
 */
export function cachedCandidates(
  ctx: StoreContext,
  q: QueueContext,
  accepts: ((filterClass: string) => boolean) | null,
  n: number,
  now: number,
): Candidate[] {
  const view = q.peekView();
  // A sub-queue made since the view was read (a priority not used before) may come first: nothing blind.
  if (view === null || !q.viewTrusted()) return [];
  const out: Candidate[] = [];
  // The checks of the sub-queues of the levels before (see aboveChecks).
  const unchanged: ZkOp[] = [];
  const subsCheck = q.subsUnchangedOp(view);
  for (const level of priorityLevels(view.subs)) {
    // Lower priorities only when the higher ones cannot fill `n` (and never past a level not known).
    if (out.length >= n) break;
    let blind = false;
    const checks = aboveChecks(unchanged, subsCheck, level[0]?.priority ?? 0);
    for (const key of level) {
      if (accepts !== null && !accepts(key.filterClass)) continue;
      const sub = q.sub(key.filterClass, key.priority, key.lifo);
      const check = sub.unchangedOp();
      if (check !== null) unchanged.push(check);
      const buckets = sub.peekBuckets();
      // Never read, or a writer added to it since (its watch fired): its own entries still come in order,
      // but what it holds now may come before anything of a lower level.
      if (buckets === null || !sub.trusted()) blind = true;
      if (buckets === null) continue;
      let found = 0;
      for (const bucket of walkOrder(buckets, key.lifo)) {
        const entries = sub.peek(bucket);
        if (entries === undefined) {
          // A listing not known (or out of date) before `n` were found: the rest of this level is unknown.
          blind = true;
          break;
        }
        for (const entry of entries) {
          if (found >= n) break;
          if (skipUntil(ctx.claims, entry, now) === null) {
            out.push({ entry, sub, priority: key.priority, checks });
            found += 1;
          }
        }
        if (found >= n) break;
      }
    }
    // A sub-queue of this level not fully known: what lower levels hold may not come next.
    if (blind) break;
  }
  return out.sort(byEntry).slice(0, n);
}

/** True when the task's state still names this entry (else the entry is left over). */
export function entryMatches(state: TaskState, entry: Entry): boolean {
  return namesEntry(state.entry, entry);
}

/** The claim multi of one task: remove a stale claim (if any), create ours, write `state` with the version read. */
export function buildClaim(
  q: QueueContext,
  candidate: Candidate,
  read: TaskRead,
  consumer: string,
  lockMs: number,
  now: number,
  staleClaimVersion: number | null,
  conf: ConfRead,
): PreparedClaim {
  const state = read.state;
  const nodes = taskNodes(q.paths.task(candidate.entry.id));
  const next = makeState(
    {
      ...state,
      phase: 'locked',
      lockUntil: now + lockMs,
      consumer,
      attempt: state.attempt + 1,
      // A message whose lock expired keeps its requeue mark; a pending one starts clean.
      requeue: state.phase === 'locked' ? state.requeue : false,
      updatedAt: now,
      // Set by groups.ts when this claim makes a held node in the message's group.
      grouped: undefined,
    },
    now,
  );
  // No claim starts once a pause is written: the configuration must be as read when it said not paused.
  const ops: ZkOp[] = [{ op: 'check', path: q.paths.conf, version: conf.version }];
  // Higher priorities the claim found empty (or held) are still so: not one message was added to them since, nor
  // was a sub-queue made that the view lacks.
  ops.push(...candidate.checks);
  if (staleClaimVersion !== null) {
    ops.push({ op: 'remove', path: nodes.claim, version: staleClaimVersion });
    // The held node in its group went in the same multi as the claim, and goes with it.
    ops.push(...releaseOps(q, candidate.entry.id, state));
  }
  const createOp = ops.push({ op: 'create', path: nodes.claim, data: Buffer.from(consumer), kind: 'ephemeral' }) - 1;
  const stateOp = ops.push({ op: 'set', path: nodes.state, data: encodeState(next), version: read.version }) - 1;
  const event: EventRecord = { type: 'started', id: candidate.entry.id, attempt: next.attempt, at: now };
  return { candidate, ops, stateOp, createOp, read, next, consumer, event };
}

/**
 * A claim's multi failed: read the task afresh next time, and its claim too if one was in the way. True when a
 * higher priority got new messages since the claim looked (its candidates should be chosen again).
 */
export function claimFailed(
  ctx: StoreContext,
  q: QueueContext,
  p: PreparedClaim,
  code: number,
  opIndex: number,
): boolean {
  const path = p.candidate.entry.path;
  const failed = p.ops[opIndex];
  if (failed?.op === 'check' && failed.path === q.paths.conf) {
    // The configuration changed (a pause?): read it again; the task's read is still good.
    q.staleConf();
    return false;
  }
  if (failed?.op === 'check' && failed.path === q.paths.dir) {
    // A sub-queue was made since the view was read (perhaps a higher priority): list the sub-queues again.
    q.staleView();
    return true;
  }
  if (failed?.op === 'check') {
    // A higher priority's sub-queue changed: list it again (its watch fires too); the task's read is still good.
    q.listOf(failed.path)?.invalidate();
    return true;
  }
  if (failed !== undefined && failed.path.startsWith(`${q.paths.groups}/`)) {
    // Its group changed since the claim read it: another claim took a slot, or GC pruned the node it had emptied
    // (groups.ts). Look again: the next round reads the group afresh. The task's read is still good.
    return true;
  }
  ctx.claims.forgetRead(path);
  if (code === ZkCode.NodeExists && opIndex === p.createOp) ctx.claims.suspect.add(path);
  return false;
}

/** A claim succeeded: remember it as held (for finish and extend) and build the message. */
export function recordClaim(
  ctx: StoreContext,
  q: QueueContext,
  p: PreparedClaim,
  stateVersion: number | undefined,
  epoch: number,
): ClaimedMessage {
  const { entry } = p.candidate;
  ctx.claims.forgetRead(entry.path);
  ctx.claims.suspect.delete(entry.path);
  ctx.claims.noteLocked(entry.path, p.next.lockUntil);
  ctx.setHeld({
    queue: q.name,
    consumer: p.consumer,
    id: entry.id,
    attempt: p.next.attempt,
    epoch,
    taskPath: q.paths.task(entry.id),
    entryPath: entry.path,
    stateVersion: stateVersion ?? p.read.version + 1,
    state: p.next,
  });
  return {
    id: entry.id,
    payload: p.read.data,
    encoding: p.read.state.encoding,
    metadata: JSON.parse(p.read.metadata.toString('utf8') || '{}') as Metadata,
    filters: parseFilterClass(p.read.state.filterClass),
    attempt: p.next.attempt,
    policy: p.next.policy ?? null,
    // Locked until the claim's `now` (read after the request was made) + lockMs.
    lockLeftMs: p.next.lockUntil - p.next.updatedAt,
  };
}
