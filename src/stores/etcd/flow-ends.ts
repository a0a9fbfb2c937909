/**
 * A flow's counts on etcd: what a child's end (or a parent's cancel, or a child's retry) does to the messages
 * above and beside it, planned as part of the Txn of that end. A waiting parent's record holds `left`, its
 * children not ended yet; a child's record says it `owes` its parent a count. The end of a child that owes
 * compares the parent's record and writes it in the end's own Txn: its count goes down, and at 0 the parent is
 * queued (its payload moves from `/kvmq/payload/{id}` to a new ordered key); a final failure applies the child's
 * policy (fail the parent, or remove the parent's waiting children and fail it). A failed parent ends for its own
 * parent in turn, in the same Txn. Each message is read once per plan and written once, whatever touches it.
 */
import { getMany, runBatch, type Change } from './txn-batch.js';
import { newIdx, QueueKeys } from './keys.js';
import { encodeRecord, owedParent, type FlowFields, type FlowLink, type MessageRecord } from './record.js';
import { failedRecord, indexOps, readOwed } from './transitions.js';
import { readRecord } from './inspect.js';
import { countChange, type CountDelta } from './counts.js';
import { eventOps, type EventNote } from './event-ops.js';
import { readConfig } from './queue-state.js';
import { prefixEnd, type Compare, type KeyValue, type Kv, type Op, type RangeOp } from './kv.js';

/** A child's end as its parent counts it: null for a success, else its final failure's error. */
export type ChildEnd = null | { readonly error: string | null };

/** A message this plan read, and what it leaves of it. */
interface Node {
  readonly link: FlowLink;
  readonly keys: QueueKeys;
  readonly before: MessageRecord;
  readonly rev: number;
  after: MessageRecord | null;
  /** Ops besides its record and index entries (the ordered key, the kept payload). */
  readonly extra: Op[];
}

/** The record without its debt to its parent: it has ended for it. */
export function settled(r: MessageRecord): MessageRecord {
  if (r.flow?.owes !== true) return r;
  const flow = { ...r.flow };
  delete flow.owes;
  return { ...r, flow };
}

/** A parent's links once it waits no more: without its count. */
function withoutCount(flow: FlowFields | undefined): FlowFields {
  const links = { ...flow };
  delete links.left;
  return links;
}

/** The end a record written by a finish (or a failure) is for its parent; undefined when it has not ended. */
export function childEndOf(r: MessageRecord): ChildEnd | undefined {
  if (r.phase === 'done') return null;
  if (r.phase === 'failed') return { error: r.error };
  return undefined;
}

const NO_RECORDS: ReadonlyMap<string, KeyValue | null> = new Map();

export class FlowEnds {
  private readonly nodes = new Map<string, Node | null>();
  /** The events of the side changes (a parent failed, a child removed), by queue; null where events are off. */
  private readonly events = new Map<string, { keys: QueueKeys; notes: EventNote[] } | null>();

  /** `known`: records read already (a failed Txn's reads), by key, null for absent: planned from without a read. */
  constructor(
    private readonly kv: Kv,
    private readonly root: string,
    private readonly known: ReadonlyMap<string, KeyValue | null> = NO_RECORDS,
  ) {}

  /** Counts child `link` (its flow fields as read) ending as `end` for its parent; nothing when it owes nothing. */
  async childEnded(link: FlowLink, flow: FlowFields | undefined, end: ChildEnd): Promise<void> {
    const owed = owedParent(flow);
    if (owed === undefined) return;
    const parent = await this.read(owed);
    if (parent?.after?.phase !== 'waiting') return;
    if (end === null || flow?.policy === 'ignore') {
      const left = (parent.after.flow?.left ?? 1) - 1;
      if (left > 0) parent.after = { ...parent.after, flow: { ...parent.after.flow, left } };
      else await this.release(parent);
      return;
    }
    const error = `child ${link[0]}/${link[1]} failed${end.error === null ? '' : `: ${end.error}`}`;
    if (flow?.policy === 'remove') await this.removeWaiting(parent, link);
    await this.failWaiting(parent, error);
  }

  /**
   * Cancels the waiting parent `link`: it fails with `error`, and so does each child that owes it and has not
   * started (a waiting one as this one, a pending one as a cancel fails it). False when it is not waiting.
   */
  async cancelParent(link: FlowLink, error: string): Promise<boolean> {
    const node = await this.read(link);
    if (node?.after?.phase !== 'waiting') return false;
    const children = node.after.flow?.children ?? [];
    await this.failWaiting(node, error);
    for (const child of children) {
      const c = await this.read(child);
      if (c?.after?.flow?.owes !== true) continue;
      if (c.after.phase === 'waiting') await this.cancelParent(child, error);
      else if (c.after.phase === 'pending') await this.failPending(c, error);
    }
    return true;
  }

  /**
   * A failed child queued again (retry) while its parent still waits owes it a count again: the parent's count
   * goes up. Returns whether it owes (the caller sets `owes` in the child's new record).
   */
  async childAgain(r: MessageRecord): Promise<boolean> {
    const parentLink = r.flow?.parent;
    if (r.flow?.owes === true || parentLink === undefined) return false;
    const parent = await this.read(parentLink);
    if (parent?.after?.phase !== 'waiting') return false;
    const left = (parent.after.flow?.left ?? 0) + 1;
    parent.after = { ...parent.after, flow: { ...parent.after.flow, left } };
    return true;
  }

  /** Notes an event of a message this plan changes, in its queue (whose configuration says whether it keeps them). */
  private async note(keys: QueueKeys, note: EventNote): Promise<void> {
    if (!this.events.has(keys.prefix)) {
      const on = (await readConfig(this.kv, keys)).events;
      this.events.set(keys.prefix, on ? { keys, notes: [] } : null);
    }
    this.events.get(keys.prefix)?.notes.push(note);
  }

  /** The plan as one change: each message written compared at the mod revision read. */
  change(): Change & { counts: CountDelta[] } {
    const compares: Compare[] = [];
    const ops: Op[] = [];
    const reads: RangeOp[] = [];
    const counts: CountDelta[] = [];
    for (const node of this.nodes.values()) {
      if (node === null || node.after === node.before) continue;
      const id = node.link[1];
      const key = node.keys.record(id);
      compares.push({ key, target: 'mod', result: '=', operand: node.rev });
      reads.push({ type: 'range', key });
      if (node.after === null) ops.push({ type: 'delete', key });
      else ops.push({ type: 'put', key, value: encodeRecord(node.after) });
      ops.push(...node.extra, ...indexOps(node.keys, id, node.before, node.after));
      counts.push(...countChange(node.keys, node.before, node.after));
    }
    const now = Date.now();
    for (const queue of this.events.values())
      if (queue !== null) ops.push(...eventOps(queue.keys, true, now, ...queue.notes));
    return { compares, ops, reads, counts };
  }

  /** A message as this plan leaves it so far, read on first use; null when it is gone. */
  private async read(link: FlowLink): Promise<Node | null> {
    const keys = new QueueKeys(this.root, link[0]);
    const key = keys.record(link[1]);
    if (this.nodes.has(key)) return this.nodes.get(key) ?? null;
    const [item] = this.known.has(key) ? [this.known.get(key)] : await getMany(this.kv, [key]);
    let node: Node | null = null;
    if (item != null) {
      const before = readRecord(item);
      node = { link, keys, before, rev: item.modRevision, after: before, extra: [] };
    }
    this.nodes.set(key, node);
    return node;
  }

  /** The parent's last child ended: queued, at the ready time it was written with (its runAt, if any). */
  private async release(node: Node): Promise<void> {
    const r = node.after as MessageRecord;
    const id = node.link[1];
    const [payload] = await getMany(this.kv, [node.keys.payload(id)]);
    const now = Date.now();
    const idx = newIdx(r.priority);
    node.after = { ...r, phase: 'pending', idx, updatedAt: now, flow: withoutCount(r.flow) };
    node.extra.push(
      { type: 'put', key: node.keys.ordered(idx, id), value: payload?.value ?? Buffer.alloc(0) },
      { type: 'delete', key: node.keys.payload(id) },
    );
  }

  /** A waiting parent fails in place (it never ran; its payload stays kept), and ends for its parent in turn. */
  private async failWaiting(node: Node, error: string): Promise<void> {
    const r = node.after as MessageRecord;
    node.after = settled(failedRecord({ ...r, flow: withoutCount(r.flow) }, error, Date.now()));
    await this.note(node.keys, { type: 'failed', id: node.link[1], attempt: r.attempt, error });
    await this.childEnded(node.link, r.flow, { error });
  }

  /** A pending child of a canceled parent fails as a cancel fails it: its payload kept for a retry. */
  private async failPending(node: Node, error: string): Promise<void> {
    const r = node.after as MessageRecord;
    const id = node.link[1];
    if (r.idx !== null) {
      const ordered = node.keys.ordered(r.idx, id);
      const [payload] = await getMany(this.kv, [ordered]);
      node.extra.push(
        { type: 'delete', key: ordered },
        { type: 'put', key: node.keys.payload(id), value: payload?.value ?? Buffer.alloc(0) },
      );
    }
    node.after = settled(failedRecord(r, error, Date.now()));
    await this.note(node.keys, { type: 'failed', id, attempt: r.attempt, error });
  }

  /** Removes a parent's children that owe it and have not started (but `except`, the one that failed), and theirs. */
  private async removeWaiting(parent: Node, except: FlowLink): Promise<void> {
    for (const child of parent.after?.flow?.children ?? []) {
      if (child[0] === except[0] && child[1] === except[1]) continue;
      const c = await this.read(child);
      const r = c?.after;
      if (c === null || r?.flow?.owes !== true) continue;
      if (r.phase !== 'waiting' && r.phase !== 'pending') continue;
      if (r.phase === 'waiting') await this.removeWaiting(c, except);
      const id = child[1];
      c.extra.push(
        { type: 'delete', key: c.keys.payload(id) },
        { type: 'delete', key: c.keys.report(id) },
        ...(r.idx === null ? [] : [{ type: 'delete', key: c.keys.ordered(r.idx, id) } as const]),
      );
      c.after = null;
      await this.note(c.keys, { type: 'removed', id, attempt: r.attempt });
    }
  }
}

/**
 * Before a clear removes the queue: each flow child in it that has not been counted for its parent (outside the
 * queue, or in it) is, in a Txn of its own that also drops its debt. An ended one (an unsettled entry) counts
 * as it ended, as at GC; any other ends as a removal. A process killed along the way leaves each child either
 * still owing, or counted: never gone uncounted.
 */
export async function settleBeforeClear(kv: Kv, keys: QueueKeys): Promise<void> {
  await settleEnded(kv, keys);
  const res = await kv.range({ key: keys.owesIndex, end: prefixEnd(keys.owesIndex), keysOnly: true });
  for (const item of res.kvs) {
    await settleChild(kv, keys, item.key.slice(keys.owesIndex.length), () => ({ error: 'removed' }));
  }
}

/** Tries of one child's count against its parent's other writers. */
const SETTLE_TRIES = 20;

/**
 * GC's part: counts for their parents the ends a dispatcher wrote without them (a lost delivery failed at
 * maxDeliveries, a plain consumer's ack), each in a Txn comparing the child's record, which loses its debt.
 */
export async function settleEnded(kv: Kv, keys: QueueKeys): Promise<void> {
  const res = await kv.range({ key: keys.unsettledIndex, end: prefixEnd(keys.unsettledIndex) });
  for (const item of res.kvs) {
    const id = item.key.slice(keys.unsettledIndex.length);
    if (readOwed(item.value).deadLettered !== null) await settleDeadLettered(kv, keys, id);
    else await settleChild(kv, keys, id, childEndOf);
  }
}

/** Counts child `id` for its parent as `endOf` its record says (nothing while undefined), dropping its debt. */
async function settleChild(
  kv: Kv,
  keys: QueueKeys,
  id: string,
  endOf: (record: MessageRecord) => ChildEnd | undefined,
): Promise<void> {
  for (let tries = 0; tries < SETTLE_TRIES; tries++) {
    const [read] = await getMany(kv, [keys.record(id)]);
    const record = read == null ? null : readRecord(read);
    const end = record === null ? undefined : endOf(record);
    if (read == null || record === null || end === undefined || owedParent(record.flow) === undefined) return;
    const ends = new FlowEnds(kv, keys.root);
    await ends.childEnded([keys.queue, id], record.flow, end);
    const next = settled(record);
    const flow = ends.change();
    const change: Change = {
      compares: [{ key: keys.record(id), target: 'mod', result: '=', operand: read.modRevision }, ...flow.compares],
      ops: [
        { type: 'put', key: keys.record(id), value: encodeRecord(next) },
        ...indexOps(keys, id, record, next),
        ...flow.ops,
      ],
      reads: [],
      counts: flow.counts,
    };
    if ((await runBatch(kv, [change])).results[0]?.ok === true) return;
  }
}

/**
 * Counts a child the dispatcher moved to the dead-letter queue as a final failure for its parent, in a Txn that
 * compares and deletes the entry: its record is gone from this queue, so the entry is what says it owes.
 */
async function settleDeadLettered(kv: Kv, keys: QueueKeys, id: string): Promise<void> {
  const key = keys.unsettled(id);
  for (let tries = 0; tries < SETTLE_TRIES; tries++) {
    const [read] = await getMany(kv, [key]);
    const owed = read == null ? null : readOwed(read.value);
    if (read == null || owed?.deadLettered == null) return;
    const ends = new FlowEnds(kv, keys.root);
    await ends.childEnded([keys.queue, id], owed.flow, owed.deadLettered);
    const flow = ends.change();
    const change: Change = {
      compares: [{ key, target: 'mod', result: '=', operand: read.modRevision }, ...flow.compares],
      ops: [{ type: 'delete', key }, ...flow.ops],
      reads: [],
      counts: flow.counts,
    };
    if ((await runBatch(kv, [change])).results[0]?.ok === true) return;
  }
}
