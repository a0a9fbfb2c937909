/**
 * Debounce: `/debounce/<debounce id>` holds the id of the message that debounce id last added. The index is
 * lazy: an enqueue with a debounce id reads it, then the message it names, and when that message is still
 * waiting (pending: `queued` or `queued-with-backoff`) and was added with the same debounce id, replaces its
 * payload, encoding, metadata and ready time in one multi that also checks the index's version; otherwise it
 * adds the new message in one multi that creates the index node or sets it with the version read. Of racing
 * enqueues only one multi commits; the others read again. The index node goes with the message it names
 * (GC, remove) or with clear.
 */
import { isZkError, ZkCode, type ZkOp, type ZkSession } from './client.js';
import { decodeState, deriveState, encodeState, entryPrefix, makeState, priorityOf, taskNodes } from './layout.js';
import type { TaskState } from './layout.js';
import { resolveEntry } from './actions.js';
import type { QueueContext } from './queue.js';
import type { NewMessage } from '../contract/contract.js';
import type { EventRecord } from './events.js';
import { debouncePath } from './debounce-index.js';

/** What an enqueue with a debounce id found. */
export interface DebounceRead {
  /** The op that claims the index for a new message: create it, or set it with the version read. */
  readonly claimIndex: ZkOp;
  /** The waiting message to replace, or null. */
  readonly waiting: { readonly id: string; readonly state: TaskState; readonly version: number } | null;
  readonly indexVersion: number | null;
}

export async function readDebounce(zk: ZkSession, q: QueueContext, m: NewMessage, now: number): Promise<DebounceRead> {
  const debounceId = m.debounceId ?? '';
  const path = debouncePath(q, debounceId);
  let index;
  try {
    index = await zk.get(path);
  } catch (error) {
    if (!isZkError(error, ZkCode.NoNode)) throw error;
    return { claimIndex: { op: 'create', path, data: Buffer.from(m.id) }, waiting: null, indexVersion: null };
  }
  const version = index.stat.version;
  const claimIndex: ZkOp = { op: 'set', path, data: Buffer.from(m.id), version };
  const id = index.data.toString('utf8');
  const nodes = taskNodes(q.paths.task(id));
  let read;
  try {
    read = await zk.get(nodes.state);
  } catch (error) {
    if (!isZkError(error, ZkCode.NoNode)) throw error;
    return { claimIndex, waiting: null, indexVersion: version };
  }
  const state = decodeState(nodes.state, read.data);
  const current = deriveState(state, false, now);
  const waiting =
    state.phase === 'pending' &&
    state.debounce === debounceId &&
    (current === 'queued' || current === 'queued-with-backoff');
  return { claimIndex, waiting: waiting ? { id, state, version: read.stat.version } : null, indexVersion: version };
}

/** The multi that gives the waiting message `m`'s payload, encoding, metadata and ready time. */
export async function replaceOps(
  zk: ZkSession,
  q: QueueContext,
  m: NewMessage,
  found: DebounceRead,
  now: number,
): Promise<{ ops: ZkOp[]; event: EventRecord; oldEntry: string | null } | null> {
  const waiting = found.waiting;
  if (waiting === null || found.indexVersion === null) return null;
  const { id, state } = waiting;
  const nodes = taskNodes(q.paths.task(id));
  const readyAt = now + m.initialBackoffMs;
  const sub = q.sub(state.filterClass, priorityOf(state));
  const prefix = `${await sub.tailBucket()}/${entryPrefix(readyAt, id)}`;
  const oldEntry = await resolveEntry(zk, state.entry);
  const next = makeState(
    {
      ...state,
      readyAt,
      requeue: false,
      encoding: m.encoding,
      hasMetadata: Object.keys(m.metadata).length > 0,
      entry: prefix,
      updatedAt: now,
    },
    now,
  );
  const ops: ZkOp[] = [
    { op: 'check', path: debouncePath(q, m.debounceId ?? ''), version: found.indexVersion },
    { op: 'set', path: nodes.state, data: encodeState(next), version: waiting.version },
    { op: 'set', path: nodes.data, data: Buffer.from(m.payload), version: -1 },
    { op: 'set', path: nodes.metadata, data: Buffer.from(JSON.stringify(m.metadata)), version: -1 },
  ];
  if (oldEntry !== null) ops.push({ op: 'remove', path: oldEntry, version: -1 });
  ops.push({ op: 'create', path: prefix, kind: 'sequential' });
  ops.push(...(await q.waitingOps(id, readyAt, now)));
  ops.push({
    op: 'set',
    path: q.paths.classDir(state.filterClass, priorityOf(state)),
    data: Buffer.alloc(0),
    version: -1,
  });
  return { ops, event: { type: 'enqueued', id, attempt: state.attempt, at: now }, oldEntry };
}
