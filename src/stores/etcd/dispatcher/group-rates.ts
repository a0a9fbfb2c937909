/**
 * groupRateLimit in the dispatcher: each group's next start time (`tat`, model/rate-limit.ts spacedGrant) in
 * memory and at `/queue/{q}/kvmq/grate/{group}`, put in the Txn of the delivery that charges it, so a
 * dispatcher taking over reads where the last one left off (snapshot.ts). A group with a charge in flight
 * starts nothing more until it answers. A time that has passed says no more than no key at all, so such keys
 * are deleted in a sweep (once per SWEEP_EVERY_MS, or right after the last while it leaves some behind): only
 * groups that started something lately are kept.
 */
import { spacedGrant } from '../../../model/rate-limit.js';
import { TimeHeap } from './heap.js';
import type { KeyValue, Op } from '../kv.js';
import type { QueueKeys } from '../keys.js';
import type { RateLimit } from '../../../model/types.js';
import type { Planned } from './types.js';

export const SWEEP_EVERY_MS = 1000;
// Deletes per sweep change (etcd takes 128 ops in a Txn, the fence among them), and per sweep.
const SWEEP_MAX = 100;
const SWEEP_ROUND = 1000;

interface Entry {
  tat: number;
  /** The revision of the last write of the key known to have committed (0: none known). */
  rev: number;
  /** A Txn that writes or deletes the key is in flight. */
  flying: boolean;
}

/** A charge for one delivery: its put goes in the delivery's Txn, and one of the callbacks follows its answer. */
export interface GroupCharge {
  readonly op: Op;
  ok(revision: number): void;
  /** The Txn failed (nothing written): the group's slot is given back. */
  fail(): void;
  /** No answer (written or not): the slot stays spent. */
  error(): void;
}

export class GroupRates {
  private readonly entries = new Map<string, Entry>();
  /** Groups whose messages wait for their slot, by its time (stale items are skipped when due). */
  private readonly waits = new TimeHeap<string>();
  private readonly waiting = new Map<string, number>();
  /** Groups whose messages wait for a Txn in flight on the group's key: they wait for the slot once it answers. */
  private readonly afterFlight = new Set<string>();
  /** Groups by their `tat`: the sweep's candidates once it has passed (stale items are skipped). */
  private readonly expiring = new TimeHeap<string>();
  private lastSweep = 0;
  /** Sweep changes in flight: the next sweep waits for them. */
  private sweeping = 0;
  /** The last sweep stopped at SWEEP_ROUND with more keys past their time. */
  private backlog = false;

  constructor(private readonly keys: QueueKeys) {}

  /** The keys as a new dispatcher's snapshot read them. */
  adopt(kvs: readonly KeyValue[]): void {
    for (const kv of kvs) {
      const group = kv.key.slice(this.keys.groupRates.length);
      const tat = Number(kv.value.toString('utf8')) || 0;
      this.entries.set(group, { tat, rev: kv.modRevision, flying: false });
      this.expiring.push(tat, group);
    }
  }

  /** A key deleted (by a clear, or a sweep) at `revision`: the group starts afresh unless written since. */
  deleted(key: string, revision: number): void {
    const group = key.slice(this.keys.groupRates.length);
    const entry = this.entries.get(group);
    if (entry !== undefined && !entry.flying && entry.rev < revision) this.entries.delete(group);
  }

  /** Whether a message of `group` may start now under `limit`. */
  free(limit: RateLimit, group: string, now: number): boolean {
    const entry = this.entries.get(group);
    return entry === undefined || (!entry.flying && spacedGrant(limit, entry.tat, now).granted);
  }

  /** A group's message waits: plan again when its slot comes (after its Txn in flight, if any, answered). */
  wait(group: string): void {
    const entry = this.entries.get(group);
    if (entry?.flying === true) {
      this.afterFlight.add(group);
      return;
    }
    const at = entry?.tat ?? 0;
    if (this.waiting.get(group) === at) return;
    this.waiting.set(group, at);
    this.waits.push(at, group);
  }

  /** Groups whose slot has come since they were told to wait. */
  *due(now: number): Generator<string> {
    for (let due = this.waits.popDue(now); due !== null; due = this.waits.popDue(now)) {
      if (this.waiting.get(due.item) !== due.time) continue;
      this.waiting.delete(due.item);
      yield due.item;
    }
  }

  /** When the first waiting group's slot comes (Infinity: none waits). */
  get wakeAt(): number {
    return this.waits.peekTime();
  }

  /** Charges a start of `group` (after `free` said yes). */
  take(limit: RateLimit, group: string, now: number): GroupCharge {
    const existing = this.entries.get(group);
    const entry = existing ?? { tat: 0, rev: 0, flying: false };
    const before = entry.tat;
    entry.tat = spacedGrant(limit, before, now).tat;
    entry.flying = true;
    this.entries.set(group, entry);
    this.expiring.push(entry.tat, group);
    return {
      op: { type: 'put', key: this.keys.groupRates + group, value: Buffer.from(String(entry.tat), 'utf8') },
      ok: (revision) => {
        entry.rev = revision;
        this.landed(group, entry);
      },
      fail: () => {
        entry.tat = before;
        if (existing === undefined) this.entries.delete(group);
        else this.expiring.push(before, group);
        this.landed(group, entry);
      },
      error: () => this.landed(group, entry),
    };
  }

  /** A Txn on the group's key answered: its waiting messages wait for the slot now. */
  private landed(group: string, entry: Entry): void {
    entry.flying = false;
    if (this.afterFlight.delete(group)) this.wait(group);
  }

  /** When a sweep is next worth planning (Infinity: nothing to sweep, or a sweep in flight). */
  sweepAt(): number {
    const first = this.expiring.peekTime();
    if (first === Infinity || this.sweeping > 0) return Infinity;
    // A sweep that left keys past their time goes on as soon as it answered: sweeps keep up with any churn.
    return this.backlog ? first : Math.max(first, this.lastSweep + SWEEP_EVERY_MS);
  }

  /** Deletes the keys of groups whose time has passed, up to SWEEP_ROUND in changes of SWEEP_MAX. */
  sweep(now: number): Planned[] {
    if (now < this.sweepAt()) return [];
    this.lastSweep = now;
    const swept: [string, Entry][] = [];
    while (swept.length < SWEEP_ROUND) {
      const due = this.expiring.popDue(now);
      if (due === null) break;
      const entry = this.entries.get(due.item);
      // Charged again since (a later item stands for it), in flight, or gone already: skipped.
      if (entry === undefined || entry.tat !== due.time || entry.flying) continue;
      entry.flying = true;
      swept.push([due.item, entry]);
    }
    this.backlog = swept.length === SWEEP_ROUND;
    const changes: Planned[] = [];
    for (let at = 0; at < swept.length; at += SWEEP_MAX) changes.push(this.deletes(swept.slice(at, at + SWEEP_MAX)));
    return changes;
  }

  /** One change deleting the keys of `swept`, each group's entry dropped once it succeeded. */
  private deletes(swept: readonly [string, Entry][]): Planned {
    this.sweeping += 1;
    const answered = (ok: boolean): void => {
      this.sweeping -= 1;
      for (const [group, entry] of swept) {
        if (ok && this.entries.get(group) === entry) this.entries.delete(group);
        else if (!ok) this.expiring.push(entry.tat, group);
        this.landed(group, entry);
      }
    };
    return {
      compares: [],
      ops: swept.map(([group]) => ({ type: 'delete', key: this.keys.groupRates + group })),
      reads: [],
      onOk: () => answered(true),
      onFail: () => answered(false),
      onError: () => answered(false),
    };
  }

  /** How many groups are kept (for tests and logs). */
  get size(): number {
    return this.entries.size;
  }
}
