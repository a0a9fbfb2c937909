/**
 * Group commit for one queue's writes of one kind (enqueues, finishes): the changes of concurrent calls share
 * Txns. A full Txn goes at once; the rest, a partial Txn, waits while another Txn of the lane is in flight and
 * then goes with whatever joined it meanwhile (calls made as the earlier Txn's callers resume). So a burst that
 * fills a Txn and a bit more does not send the bit in a Txn of its own: it rides with the next burst. That is
 * what keeps 64 enqueues of two ops each at one Txn per burst now that each Txn also puts a count slot
 * (counter-slots.ts): 63 go, one waits for the next 63. An idle lane sends at once (after the current tick,
 * so the tick's other calls join). A lane with `holdMs` (finishes) also holds the rest of a burst that filled a
 * Txn that long with nothing in flight, for the next burst (docs/etcd.md, Group commit). Each change is still
 * its own: a Txn fails or succeeds as a whole, and each change gets its own result and reads back, as from
 * runBatch.
 */
import { pack, runBatch, type Change, type ChangeResult } from './txn-batch.js';
import type { Kv } from './kv.js';

/** A change and what to call with its answer (callbacks: a caller that has its own promise needs no second). */
export interface LaneEntry {
  readonly change: Change;
  readonly resolve: (result: ChangeResult) => void;
  readonly reject: (error: unknown) => void;
}

export class TxnLane {
  private waiting: LaneEntry[] = [];
  private inFlight = 0;
  private scheduled = false;
  private checking = false;
  /** Holding the rest of a burst that filled a Txn, for the next burst (holdMs). */
  private holding: NodeJS.Timeout | null = null;
  /** The last packing, when it sent nothing and nothing joined since: the next send reuses it. */
  private unsent: Packing | null = null;

  /** `holdMs`: how long the rest of a burst that filled a Txn waits for the next burst, even with none in flight. */
  constructor(
    private readonly kv: Kv,
    private readonly holdMs = 0,
  ) {}

  /** Commits the changes, each in some Txn of this lane; resolves once every one of them is answered. */
  run(changes: readonly Change[]): Promise<ChangeResult[]> {
    if (changes.length === 0) return Promise.resolve([]);
    const [only] = changes;
    if (changes.length === 1 && only !== undefined) {
      // A worker's finish: one change per call, so one promise rather than one per change and Promise.all.
      return new Promise((resolve, reject) => this.submit([{ change: only, resolve: (r) => resolve([r]), reject }]));
    }
    const entries: LaneEntry[] = [];
    const answers = changes.map(
      (change) => new Promise<ChangeResult>((resolve, reject) => entries.push({ change, resolve, reject })),
    );
    this.submit(entries);
    return Promise.all(answers);
  }

  /** Commits each entry's change in some Txn of this lane, calling its `resolve` as soon as that Txn answers. */
  submit(entries: readonly LaneEntry[]): void {
    if (entries.length === 0) return;
    for (const entry of entries) this.waiting.push(entry);
    if (this.holding !== null) {
      // The next burst came: the held rest goes with it.
      clearTimeout(this.holding);
      this.holding = null;
    }
    if (!this.checking) {
      // Once the synchronous calls of this moment have joined: one packing for them all, not one per call.
      this.checking = true;
      queueMicrotask(() => {
        this.checking = false;
        this.send(false);
      });
    }
  }

  /** Sends the full Txns the waiting changes make; the partial one only when `alone` and nothing is in flight. */
  private send(alone: boolean): void {
    const { waiting } = this;
    const reuse = this.unsent !== null && this.unsent.waiting === waiting && this.unsent.length === waiting.length;
    const packing = reuse && this.unsent !== null ? this.unsent : packed(waiting);
    this.unsent = null;
    const { ready, later, batches } = packing;
    let taken = 0;
    // Loops, not forEach and map: this runs for every tick of a busy lane.
    for (let i = 0; i < batches.length; i++) {
      const size = (batches[i] as Change[]).length;
      const partial = i === batches.length - 1;
      if (partial && i > 0 && this.holdMs > 0) this.hold();
      if (partial && !(alone && this.inFlight === 0 && this.holding === null)) break;
      void this.execute(ready.slice(taken, taken + size));
      taken += size;
    }
    // A partial batch kept as it was (a burst smaller than a Txn waits for the tick): not packed twice.
    if (taken === 0 && later.length === 0) this.unsent = packing;
    else this.waiting = [...ready.slice(taken), ...later];
    // A held rest goes when its hold ends (hold()), not at the next tick.
    if (this.waiting.length > 0 && this.inFlight === 0 && this.holding === null) this.schedule();
  }

  private hold(): void {
    if (this.holding !== null) clearTimeout(this.holding);
    this.holding = setTimeout(() => {
      this.holding = null;
      if (this.inFlight === 0 && this.waiting.length > 0) this.send(true);
    }, this.holdMs);
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    // After the tick: the calls its microtasks make (callers resuming after the last Txn) join first.
    setImmediate(() => {
      this.scheduled = false;
      if (this.inFlight === 0 && this.waiting.length > 0) this.send(true);
    });
  }

  private async execute(batch: readonly LaneEntry[]): Promise<void> {
    this.inFlight += 1;
    try {
      const changes: Change[] = new Array<Change>(batch.length);
      for (let i = 0; i < batch.length; i++) changes[i] = (batch[i] as LaneEntry).change;
      const { results } = await runBatch(this.kv, changes);
      for (let i = 0; i < batch.length; i++) {
        const w = batch[i] as LaneEntry;
        const result = results[i];
        if (result === undefined) w.reject(new Error('kvmq: a Txn answered without a result for a change'));
        else w.resolve(result);
      }
    } catch (error) {
      for (const w of batch) w.reject(error);
    } finally {
      this.inFlight -= 1;
      if (this.inFlight === 0 && this.waiting.length > 0) this.schedule();
    }
  }
}

/**
 * Changes of different calls may write the same key (the same id enqueued twice), which one Txn refuses
 * (etcd: duplicate key): such a change waits for a later Txn, which then sees what the first one did. The
 * ready ones are packed into Txn-sized batches.
 */
function packed(waiting: LaneEntry[]): Packing {
  const written = new Set<string>();
  const ready: LaneEntry[] = [];
  const later: LaneEntry[] = [];
  const changes: Change[] = [];
  for (const w of waiting) {
    const { ops } = w.change;
    let clash = false;
    for (const op of ops) if (written.has(op.key)) clash = true;
    if (clash) later.push(w);
    else {
      for (const op of ops) written.add(op.key);
      ready.push(w);
      changes.push(w.change);
    }
  }
  const batches = pack(changes);
  return { waiting, length: waiting.length, ready, later, batches };
}

/** The waiting changes (as they were when packed) apart, and the ready ones in Txn-sized batches. */
interface Packing {
  readonly waiting: LaneEntry[];
  readonly length: number;
  readonly ready: LaneEntry[];
  readonly later: LaneEntry[];
  readonly batches: Change[][];
}

// Per connection, then per lane name (a queue's prefix and the kind of write).
const lanes = new WeakMap<Kv, Map<string, TxnLane>>();

/** The lane of `name` on this connection, made on first use. */
export function laneOf(kv: Kv, name: string, holdMs = 0): TxnLane {
  let byName = lanes.get(kv);
  if (byName === undefined) {
    byName = new Map();
    lanes.set(kv, byName);
  }
  let lane = byName.get(name);
  if (lane === undefined) {
    lane = new TxnLane(kv, holdMs);
    byName.set(name, lane);
  }
  return lane;
}
