/**
 * Listings by state, from the index sub-trees the state changes keep in their
 * own multis: `/failed` (failed), `/parents` (waiting-children), `/done` (done-awaiting-gc, done-with-backoff),
 * `/waiting` (queued-with-backoff, done-with-requeue) and the sub-queues
 * (queued, locked, locked-with-requeue). Each listed entry's task state is read (in shared
 * requests) and its status derived exactly as status() does; entries that no
 * longer match their task are skipped.
 *
 * Order within a state: for `/done` and `/failed`, their finishing order (for `/parents`, their writing order)
 * (bucket by bucket, oldest first), so a page reads only the buckets it walks;
 * for backoffs (queued-with-backoff, done-with-requeue), their end, from
 * `/waiting`; for locked and queued, ready time across every sub-queue (bucket
 * listings read lowest ready time first, as far as the page needs: ready-entries.ts).
 */
import { makeCursor, readCursor, type ListQuery } from '../../model/list.js';
import { decodeState, parseSubNode, deriveState, namesEntry, taskNodes, type Entry, type TaskState } from './layout.js';
import { childrenOf, contentOf, statusOf } from './inspect.js';
import { sorted, walkReady, type Keyed } from './ready-entries.js';
import type { StoreContext } from './context.js';
import type { QueueContext } from './queue.js';
import type { StoredListing, StoredPage } from '../contract/contract.js';
import type { MessageState } from '../../model/types.js';

/** Entries whose tasks are read per round. */
const READ_CHUNK = 128;

export async function listMessages(ctx: StoreContext, q: QueueContext, query: ListQuery): Promise<StoredPage> {
  const position = readCursor(query, 2);
  let first = 0;
  let after: string | null = null;
  if (position !== null) {
    first = Number(position[0]);
    after = position[1] ?? null;
    if (!Number.isInteger(first) || first < 0 || first >= query.states.length) {
      throw new TypeError('cursor is not one a previous page of this listing returned (same states and outcome)');
    }
  }
  const messages: StoredListing[] = [];
  if (!(await q.exists())) return { messages, cursor: null };
  for (let i = first; i < query.states.length; i++) {
    const state = query.states[i] as MessageState;
    const last = await listState(ctx, q, query, state, i === first ? after : null, messages);
    if (last !== null) return { messages, cursor: makeCursor(query, [String(i), last]) };
  }
  return { messages, cursor: null };
}

/**
 * Adds the state's messages after `after` to `out` until the page is full;
 * returns the key of the last one added when the page filled, else null.
 */
async function listState(
  ctx: StoreContext,
  q: QueueContext,
  query: ListQuery,
  state: MessageState,
  after: string | null,
  out: StoredListing[],
): Promise<string | null> {
  if (
    state === 'failed' ||
    state === 'waiting-children' ||
    state === 'done-awaiting-gc' ||
    state === 'done-with-backoff'
  ) {
    const list = state === 'failed' ? q.failed : state === 'waiting-children' ? q.parents : q.done;
    const buckets = await list.buckets();
    const from = after === null ? '' : after.slice(0, 10);
    for (const bucket of buckets) {
      if (bucket < from) continue;
      const entries = (await list.list(bucket))
        .map((entry) => ({ key: `${bucket}/${at(entry)}/${seq(entry)}`, entry }))
        .filter((e) => after === null || e.key > after);
      const last = await take(ctx, q, query, state, entries, out);
      if (last !== null) return last;
    }
    return null;
  }
  const now = Date.now();
  const entries: Keyed[] = [];
  if (state === 'queued-with-backoff' || state === 'done-with-requeue') {
    // Backoffs that have not ended, from /waiting: the ready backlog is not walked.
    for (const bucket of await q.waiting.buckets()) {
      for (const entry of await q.waiting.list(bucket)) {
        const key = `${at(entry)}/${bucket}/${seq(entry)}`;
        if (entry.at > now && (after === null || key > after)) entries.push({ key, entry });
      }
    }
    return take(
      ctx,
      q,
      query,
      state,
      sorted(entries),
      out,
      (s, entry) => s.phase === 'pending' && s.readyAt === entry.at,
    );
  }
  // Locked and queued entries were ready: only entries whose ready time has come are read, as far as the page needs.
  const subs = (await childrenOf(ctx, q.paths.queue)).map((node) => {
    const key = parseSubNode(node);
    return { list: q.sub(key.filterClass, key.priority, key.lifo), node };
  });
  return walkReady(subs, now, after, (run) => take(ctx, q, query, state, run, out));
}

/** The entry is the one the task's state names (not one left over). */
function indexed(s: TaskState, entry: Entry): boolean {
  return namesEntry(s.phase === 'done' || s.phase === 'failed' ? s.done : s.entry, entry);
}

/** Reads the tasks of `entries` in order, adding those in `state` until the page is full. */
async function take(
  ctx: StoreContext,
  q: QueueContext,
  query: ListQuery,
  state: MessageState,
  entries: readonly Keyed[],
  out: StoredListing[],
  matches: (s: TaskState, entry: Entry) => boolean = indexed,
): Promise<string | null> {
  for (let k = 0; k < entries.length && out.length < query.limit; k += READ_CHUNK) {
    const chunk = entries.slice(k, k + READ_CHUNK);
    const paths = chunk.map(({ entry }) => taskNodes(q.paths.task(entry.id)));
    const reads = await ctx.zk.getMany(paths.map((nodes) => nodes.state));
    const states = reads.map((read, n) => (read == null ? null : decodeState(paths[n]?.state ?? '', read.data)));
    // Only a locked task's claim decides its state.
    const locked = chunk.flatMap((_, n) => (states[n]?.phase === 'locked' ? [n] : []));
    const claims = await ctx.zk.getMany(locked.map((n) => paths[n]?.claim ?? ''));
    const claimed = new Set(locked.filter((_, m) => claims[m] != null));
    const now = Date.now();
    const picked: { n: number; listing: StoredListing }[] = [];
    for (const [n, { entry }] of chunk.entries()) {
      const s = states[n];
      if (s == null || !matches(s, entry)) continue;
      if (deriveState(s, claimed.has(n), now) !== state) continue;
      if (query.outcome !== null && s.outcome !== query.outcome) continue;
      const status = statusOf(q, entry.id, s, claimed.has(n), now, query.payload);
      picked.push({ n, listing: { status, content: null } });
      if (out.length + picked.length >= query.limit) break;
    }
    if (query.payload && picked.length > 0) {
      const content = await ctx.zk.getMany(picked.flatMap(({ n }) => [paths[n]?.data ?? '', paths[n]?.metadata ?? '']));
      picked.forEach((p, m) => {
        const data = content[2 * m];
        const metadata = content[2 * m + 1];
        const s = states[p.n];
        // Removed between the reads: not listed.
        p.listing =
          s == null || data == null || metadata == null
            ? p.listing
            : { ...p.listing, content: contentOf(s, data.data, metadata.data) };
      });
    }
    for (const p of picked) {
      if (!query.payload || p.listing.content !== null) out.push(p.listing);
    }
    if (out.length >= query.limit) return chunk[picked[picked.length - 1]?.n ?? chunk.length - 1]?.key ?? null;
  }
  return null;
}

function at(entry: Entry): string {
  return entry.name.slice(0, 13);
}

function seq(entry: Entry): string {
  return entry.name.slice(-10);
}
