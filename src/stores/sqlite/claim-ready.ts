/**
 * Taking ready messages for a claim: one priority at a time, the lowest
 * number first, and within it the oldest ready first across the accepted
 * filter classes. Each step reads the pending index at (class, priority), so
 * a claim never reads messages of a priority below the ones it takes; the
 * next priority present is found by one index seek per class.
 */
import type { Statements, MessageRow } from './statements.js';

/** The claim's fixed parameters, as the lock statements bind them. */
export interface LockParams {
  readonly queue: string;
  readonly now: number;
  readonly lockUntil: number;
  readonly consumer: string;
}

/** A per-group rate limit a claim consults: whether a message of `group` may start now (charged if so). */
export interface GroupRateCheck {
  take(group: string): boolean;
}

/**
 * Held messages per group, and the queue's limit (Infinity for none); the claim takes no group past it, nor past
 * its rate limit when one is set.
 */
export interface GroupLimit {
  readonly max: number;
  readonly held: Map<string, number>;
  readonly rate?: GroupRateCheck;
}

/** True when a message of `group` may be held now; counts it for the group (and charges its rate). */
export function takesGroupSlot(groups: GroupLimit | null, group: string | null): boolean {
  if (groups === null || group === null) return true;
  const held = groups.held.get(group) ?? 0;
  if (held >= groups.max) return false;
  if (groups.rate !== undefined && !groups.rate.take(group)) return false;
  groups.held.set(group, held + 1);
  return true;
}

interface Candidate {
  readonly seq: number;
  readonly ready_at: number;
  readonly group_name: string | null;
}

// Candidates read per step of the group-aware path; more follow when skipped ones leave the claim short.
const CANDIDATE_PAGE = 32;

/** The lowest priority above `after` with pending messages in any of the classes, or undefined. */
export function nextPriority(
  sql: Statements,
  queue: string,
  classes: readonly string[],
  after: number,
): number | undefined {
  let next: number | undefined;
  for (const filters of classes) {
    const p = sql.nextPriority.get(queue, filters, after) as number | undefined;
    if (p !== undefined && (next === undefined || p < next)) next = p;
  }
  return next;
}

/** Locks up to `want` ready messages in the caller's transaction, by priority, then ready time and arrival. */
export function takeReady(
  sql: Statements,
  lock: LockParams,
  classes: readonly string[],
  want: number,
  groups: GroupLimit | null,
): MessageRow[] {
  const taken: MessageRow[] = [];
  // Priority 0 first without a seek: messages enqueued without a priority cost one read, as before priorities.
  let priority: number | undefined = 0;
  while (priority !== undefined && taken.length < want) {
    const need = want - taken.length;
    taken.push(
      ...(groups === null
        ? lockPriority(sql, lock, classes, priority, need)
        : lockPriorityGrouped(sql, lock, classes, priority, need, groups)),
    );
    if (taken.length < want) priority = nextPriority(sql, lock.queue, classes, priority);
  }
  return taken;
}

/** One priority, no group limit: each class gives its oldest, the oldest overall are kept, the rest put back. */
function lockPriority(
  sql: Statements,
  lock: LockParams,
  classes: readonly string[],
  priority: number,
  need: number,
): MessageRow[] {
  const ready: MessageRow[] = [];
  for (const filters of classes) {
    ready.push(...(sql.lockReady.all({ ...lock, filters, priority, limit: need }) as MessageRow[]));
  }
  ready.sort((a, b) => a.ready_at - b.ready_at || a.seq - b.seq);
  if (classes.length > 1) for (const extra of ready.splice(need)) sql.unlock.run(extra.seq);
  return ready;
}

/**
 * One priority under a group limit: candidates of every class are merged oldest first; one of a group at its
 * limit is skipped (groups full before the claim are skipped in SQL), and each taken one counts for its group.
 */
function lockPriorityGrouped(
  sql: Statements,
  lock: LockParams,
  classes: readonly string[],
  priority: number,
  need: number,
  groups: GroupLimit,
): MessageRow[] {
  const full = JSON.stringify([...groups.held].filter(([, n]) => n >= groups.max).map(([group]) => group));
  const cursors = classes.map((filters) => new ClassCursor(sql, { ...lock, filters, priority, full }));
  const chosen: number[] = [];
  while (chosen.length < need) {
    let best: ClassCursor | undefined;
    for (const cursor of cursors) {
      const head = cursor.head();
      const top = best?.head();
      if (head !== undefined && (top === undefined || (head.ready_at - top.ready_at || head.seq - top.seq) < 0)) {
        best = cursor;
      }
    }
    const next = best?.take();
    if (next === undefined) break;
    if (takesGroupSlot(groups, next.group_name)) chosen.push(next.seq);
  }
  if (chosen.length === 0) return [];
  const order = new Map(chosen.map((seq, i) => [seq, i]));
  const rows = sql.lockChosen.all({ ...lock, seqs: JSON.stringify(chosen) }) as MessageRow[];
  return rows.sort((a, b) => (order.get(a.seq) ?? 0) - (order.get(b.seq) ?? 0));
}

/** Reads one class's candidates at one priority in pages, oldest first. */
class ClassCursor {
  private page: Candidate[] = [];
  private index = 0;
  private done = false;
  private after = { t: -1, seq: -1 };

  constructor(
    private readonly sql: Statements,
    private readonly params: LockParams & { filters: string; priority: number; full: string },
  ) {}

  head(): Candidate | undefined {
    if (this.index === this.page.length && !this.done) this.fill();
    return this.page[this.index];
  }

  take(): Candidate | undefined {
    const head = this.head();
    if (head !== undefined) this.index += 1;
    return head;
  }

  private fill(): void {
    this.page = this.sql.readyCandidates.all({ ...this.params, ...this.after, limit: CANDIDATE_PAGE }) as Candidate[];
    this.index = 0;
    this.done = this.page.length < CANDIDATE_PAGE;
    const last = this.page.at(-1);
    if (last !== undefined) this.after = { t: last.ready_at, seq: last.seq };
  }
}
