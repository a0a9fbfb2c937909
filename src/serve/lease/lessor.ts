/**
 * Leases, as etcd's lessor keeps them: a TTL in seconds, a deadline, and the
 * keys attached. Grants, renewals and revocations are applied inside the
 * server's write batches, so each is on disk (with its deadline) before the
 * client hears of it; a restart therefore keeps every lease and the time it
 * had left.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { setLongTimeout, type LongTimeout } from '../../model/time.js';
import { keyBytes } from '../bytes.js';
import { Errors } from '../errors.js';
import type { LeaseAttachments, WriteTxn } from '../mvcc/kvstore.js';

/** etcd's floor for a lease TTL with its default timing (100 ms heartbeat, 1 s election timeout). */
export const MIN_TTL_SECONDS = 2;
/** etcd's ceiling for a lease TTL. */
export const MAX_TTL_SECONDS = 9_000_000_000;

export class Lease {
  readonly keys = new Set<string>();

  constructor(
    readonly id: bigint,
    public ttl: number,
    /** Wall-clock ms when the lease ends. */
    public deadline: number,
  ) {}

  remainingMs(now: number): number {
    return this.deadline - now;
  }
}

interface LeaseStatements {
  readonly insert: BetterSqlite3.Statement;
  readonly update: BetterSqlite3.Statement;
  readonly remove: BetterSqlite3.Statement;
  readonly all: BetterSqlite3.Statement;
  readonly leasedKeys: BetterSqlite3.Statement;
}

/** A min-heap of (deadline, lease) entries; renewals push new entries and stale ones are skipped when popped. */
class DeadlineHeap {
  private readonly items: { deadline: number; id: bigint }[] = [];

  get size(): number {
    return this.items.length;
  }

  clear(): void {
    this.items.length = 0;
  }

  peek(): { deadline: number; id: bigint } | undefined {
    return this.items[0];
  }

  push(deadline: number, id: bigint): void {
    const items = this.items;
    items.push({ deadline, id });
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const p = items[parent];
      const c = items[i];
      if (p === undefined || c === undefined || p.deadline <= c.deadline) break;
      items[parent] = c;
      items[i] = p;
      i = parent;
    }
  }

  pop(): void {
    const items = this.items;
    const last = items.pop();
    if (last === undefined || items.length === 0) return;
    items[0] = last;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let smallest = i;
      const s = (): number => (items[smallest] as { deadline: number }).deadline;
      if (l < items.length && (items[l] as { deadline: number }).deadline < s()) smallest = l;
      if (r < items.length && (items[r] as { deadline: number }).deadline < s()) smallest = r;
      if (smallest === i) return;
      const a = items[i] as { deadline: number; id: bigint };
      items[i] = items[smallest] as { deadline: number; id: bigint };
      items[smallest] = a;
      i = smallest;
    }
  }
}

export class Lessor implements LeaseAttachments {
  private readonly leases = new Map<bigint, Lease>();
  private readonly heap = new DeadlineHeap();
  /** Leases past their deadline whose revocation has been asked for. */
  private readonly expiring = new Set<bigint>();
  private readonly sql: LeaseStatements;
  private timer: LongTimeout | null = null;
  private timerAt = Infinity;
  private idBase: bigint;
  private stopped = false;

  constructor(
    db: BetterSqlite3.Database,
    memberId: bigint,
    private readonly onExpired: (ids: bigint[]) => void,
    private readonly now: () => number = Date.now,
  ) {
    this.sql = {
      insert: db.prepare('INSERT INTO lease (id, ttl, deadline_ms) VALUES (?, ?, ?)'),
      update: db.prepare('UPDATE lease SET deadline_ms = ? WHERE id = ?'),
      remove: db.prepare('DELETE FROM lease WHERE id = ?'),
      all: db.prepare('SELECT CAST(id AS TEXT), ttl, deadline_ms FROM lease').raw(true),
      leasedKeys: db.prepare('SELECT key, CAST(lease AS TEXT) FROM kv WHERE lease != 0').raw(true),
    };
    // Like etcd's ID generator: the member's low 16 bits, then milliseconds, then a counter.
    const ms = BigInt(now()) & 0xffffffffffn;
    this.idBase = ((memberId & 0xffffn) << 48n) | (ms << 8n);
  }

  /**
   * Loads the leases and their keys. `downtimeMs` (time the server was not
   * running) is added to every deadline: a lease keeps the time it had left.
   */
  load(downtimeMs: number): void {
    this.leases.clear();
    this.expiring.clear();
    this.heap.clear();
    for (const [id, ttl, deadline] of this.sql.all.all() as [string, number, number][]) {
      const lease = new Lease(BigInt(id), ttl, deadline + Math.max(0, downtimeMs));
      this.leases.set(lease.id, lease);
      this.heap.push(lease.deadline, lease.id);
    }
    for (const [key, id] of this.sql.leasedKeys.all() as [Buffer, string][]) {
      this.leases.get(BigInt(id))?.keys.add(key.toString('latin1'));
    }
    this.schedule();
  }

  /** Persists the shifted deadlines after `load`, inside a write transaction. */
  persistDeadlines(): void {
    for (const lease of this.leases.values()) this.sql.update.run(lease.deadline, lease.id);
  }

  get size(): number {
    return this.leases.size;
  }

  lookup(id: bigint): Lease | undefined {
    return this.leases.get(id);
  }

  /** A fresh lease ID no lease has. */
  nextId(): bigint {
    for (;;) {
      this.idBase = (this.idBase + 1n) & 0x7fffffffffffffffn;
      if (this.idBase !== 0n && !this.leases.has(this.idBase)) return this.idBase;
    }
  }

  /** Grants a lease (inside a write batch). */
  grant(id: bigint, ttlSeconds: number): Lease {
    if (id === 0n) throw Errors.leaseNotFound();
    if (ttlSeconds > MAX_TTL_SECONDS) throw Errors.leaseTtlTooLarge();
    if (this.leases.has(id)) throw Errors.leaseExist();
    const ttl = Math.max(ttlSeconds, MIN_TTL_SECONDS);
    const lease = new Lease(id, ttl, this.now() + ttl * 1000);
    this.sql.insert.run(id, ttl, lease.deadline);
    this.leases.set(id, lease);
    this.heap.push(lease.deadline, id);
    this.schedule();
    return lease;
  }

  /** Revokes a lease (inside a write batch), deleting its keys in key order in `txn`. */
  revoke(id: bigint, txn: WriteTxn): void {
    const lease = this.leases.get(id);
    if (lease === undefined) throw Errors.leaseNotFound();
    const keys = [...lease.keys].sort();
    for (const key of keys) txn.deleteRange(keyBytes(key), null);
    this.leases.delete(id);
    this.expiring.delete(id);
    this.sql.remove.run(id);
  }

  /** Renews a lease to its full TTL (inside a write batch); returns the TTL. */
  renew(id: bigint): number {
    const lease = this.leases.get(id);
    if (lease === undefined || this.expiring.has(id)) throw Errors.leaseNotFound();
    const now = this.now();
    if (lease.remainingMs(now) <= 0) throw Errors.leaseNotFound();
    lease.deadline = now + lease.ttl * 1000;
    this.sql.update.run(lease.deadline, id);
    this.heap.push(lease.deadline, id);
    return lease.ttl;
  }

  /** Leases ordered by time left, as etcd lists them. */
  list(): Lease[] {
    return [...this.leases.values()].sort((a, b) => a.deadline - b.deadline);
  }

  attach(id: bigint, key: string): void {
    this.leases.get(id)?.keys.add(key);
  }

  detach(id: bigint, key: string): void {
    this.leases.get(id)?.keys.delete(key);
  }

  /** Whether a lease's revocation failed to apply; it will be asked for again. */
  retry(id: bigint): void {
    this.expiring.delete(id);
    const lease = this.leases.get(id);
    if (lease !== undefined) this.heap.push(this.now() + 1000, id);
    this.schedule();
  }

  private schedule(): void {
    if (this.stopped) return;
    const next = this.heap.peek();
    if (next === undefined) return;
    if (this.timer !== null && this.timerAt <= next.deadline) return;
    this.timer?.clear();
    this.timerAt = next.deadline;
    this.timer = setLongTimeout(() => this.expire(), next.deadline - this.now()).unref();
  }

  private expire(): void {
    this.timer = null;
    this.timerAt = Infinity;
    const now = this.now();
    const expired: bigint[] = [];
    for (let top = this.heap.peek(); top !== undefined && top.deadline <= now; top = this.heap.peek()) {
      this.heap.pop();
      const lease = this.leases.get(top.id);
      // Skip entries of renewed leases, and leases already on their way out.
      if (lease === undefined || lease.deadline > now || this.expiring.has(top.id)) continue;
      this.expiring.add(top.id);
      expired.push(top.id);
    }
    if (expired.length > 0) this.onExpired(expired);
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    this.timer?.clear();
    this.timer = null;
  }
}
