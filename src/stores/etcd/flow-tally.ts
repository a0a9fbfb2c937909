/**
 * Siblings ending at once count in one write of their parent. Every child's end compares and writes its parent's
 * record, so ends planned apart collide: each but one loses its compare and plans again. Here the ends a
 * connection's finishes bring for one parent queue while a write of that parent is in flight, and go together in
 * the next: one read of the parent, one Txn with each child's own change and the parent's count going down by
 * as many (flow-ends.ts). The Txn is all or nothing, so a child's end and its count still commit together, and
 * each change gets its own answer as from runBatch.
 */
import { FlowEnds, type ChildEnd } from './flow-ends.js';
import { pack, runBatch, type Change, type ChangeResult } from './txn-batch.js';
import type { FlowFields, FlowLink } from './record.js';
import type { Compare, KeyValue, Kv, Op, RangeOp } from './kv.js';

/** What a message's end owes its parent: its link, its flow fields as read, and how it ended. */
export interface OwedEnd {
  readonly link: FlowLink;
  readonly flow: FlowFields & { readonly parent: FlowLink };
  readonly end: ChildEnd;
}

/**
 * A child's own change (its finish), with the end it counts for its parent. Its compares and reads pair up: the
 * read at each compare's place tells, when the Txn fails, whether that compare still holds.
 */
export interface Counted extends Change {
  readonly owed: OwedEnd;
}

interface Entry {
  readonly change: Counted;
  readonly resolve: (result: ChangeResult) => void;
  readonly reject: (error: unknown) => void;
}

/** Room kept in a Txn for the parent's part: its compare, record, index entries, and a release's moves. */
const PARENT_ROOM: Change = {
  compares: Array.from({ length: 8 }, (): Compare => ({ key: '', target: 'mod', result: '=', operand: 0 })),
  ops: Array.from({ length: 16 }, (): Op => ({ type: 'delete', key: '' })),
  reads: Array.from({ length: 8 }, (): RangeOp => ({ type: 'range', key: '' })),
};

/**
 * Tries of one write while only the parent (or a count slot) changed under it: another process counted its own
 * children meanwhile, and a fresh plan goes at once.
 */
const PARENT_TRIES = 5;

class ParentTally {
  private waiting: Entry[] = [];
  private writing = false;

  constructor(
    private readonly kv: Kv,
    private readonly root: string,
    private readonly done: () => void,
  ) {}

  add(entry: Entry): void {
    this.waiting.push(entry);
    if (this.writing) return;
    this.writing = true;
    // Once the moment's other finishes have joined.
    queueMicrotask(() => void this.drain());
  }

  private async drain(): Promise<void> {
    while (this.waiting.length > 0) {
      const taken = this.take();
      try {
        const results = await this.write(taken.map((e) => e.change));
        taken.forEach((e, i) => {
          const result = results[i];
          if (result === undefined) e.reject(new Error('kvmq: a Txn answered without a result for a change'));
          else e.resolve(result);
        });
      } catch (error) {
        for (const e of taken) e.reject(error);
      }
    }
    this.writing = false;
    this.done();
  }

  /**
   * The next ends that fit one Txn with room for the parent's part. A final failure that fails the parent (and
   * under `remove` its other children) goes alone: what it writes grows with the flow (flow-ends.ts).
   */
  private take(): Entry[] {
    const taken: Entry[] = [];
    for (const entry of this.waiting) {
      const { end, flow } = entry.change.owed;
      const alone = end !== null && flow.policy !== 'ignore';
      if (taken.length > 0 && alone) break;
      const changes = [...taken.map((e) => e.change), entry.change, PARENT_ROOM];
      if (taken.length > 0 && pack(changes).length > 1) break;
      taken.push(entry);
      if (alone) break;
    }
    this.waiting = this.waiting.slice(taken.length);
    return taken;
  }

  /**
   * One Txn: the children's changes, then the parent's part planned from a fresh read; planned again at once
   * while the children's own compares still hold. Otherwise each child's answer goes to its caller (finish.ts).
   */
  private async write(changes: readonly Counted[]): Promise<ChangeResult[]> {
    // After a lost compare, the records the last plan wrote as the failed Txn read them: no read of them again.
    let known = new Map<string, KeyValue | null>();
    for (let tries = 1; ; tries++) {
      const ends = new FlowEnds(this.kv, this.root, known);
      for (const c of changes) await ends.childEnded(c.owed.link, c.owed.flow, c.owed.end);
      const flow = ends.change();
      const { results } = await runBatch(this.kv, [...changes, flow]);
      const mine = results.slice(0, changes.length);
      const parent = results[changes.length];
      if (parent === undefined || parent.ok || tries >= PARENT_TRIES) return mine;
      if (!changes.every((c, i) => stillHolds(c, mine[i]))) return mine;
      known = new Map(flow.reads.map((r, i) => [r.key, parent.reads[i]?.kvs[0] ?? null]));
    }
  }
}

/** Whether each compare of a change that failed still holds, by the read at its place. */
function stillHolds(change: Change, result: ChangeResult | undefined): boolean {
  if (result === undefined || result.ok) return false;
  return change.compares.every((c, i) => {
    const item = result.reads[i]?.kvs[0];
    if (c.result !== '=' || c.end !== undefined) return false;
    if (c.target === 'mod') return (item?.modRevision ?? 0) === c.operand;
    if (c.target === 'version') return (item?.version ?? 0) === c.operand;
    return false;
  });
}

// Per connection, then per flow root and parent.
const tallies = new WeakMap<Kv, Map<string, ParentTally>>();

/** Runs each change in some Txn with its siblings' and their parent's count; answers align with `changes`. */
export function countEnds(kv: Kv, root: string, changes: readonly Counted[]): Promise<ChangeResult[]> {
  let byParent = tallies.get(kv);
  if (byParent === undefined) {
    byParent = new Map();
    tallies.set(kv, byParent);
  }
  const parents = byParent;
  return Promise.all(
    changes.map(
      (change) =>
        new Promise<ChangeResult>((resolve, reject) => {
          const [queue, id] = change.owed.flow.parent;
          const name = `${root}\u0000${queue}\u0000${id}`;
          let tally = parents.get(name);
          if (tally === undefined) {
            tally = new ParentTally(kv, root, () => parents.delete(name));
            parents.set(name, tally);
          }
          tally.add({ change, resolve, reject });
        }),
    ),
  );
}
