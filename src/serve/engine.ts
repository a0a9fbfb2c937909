/**
 * The server's state and the operations of etcd's applier on it: the MVCC
 * store, leases, auth, alarms and watchers over one SQLite file, with every
 * write going through group commit. Transport-free: the RPC layer decodes a
 * request, calls an operation here, and encodes what it returns.
 */
import { randomBytes } from 'node:crypto';
import { applyDeleteRange, applyPut } from './apply/kv.js';
import { applyRange } from './apply/range.js';
import {
  applyTxn,
  asRaftEntry,
  checkDeletionBudget,
  checkPuts,
  checkRanges,
  compareToPath,
  isTxnReadonly,
  type TxnReader,
} from './apply/txn.js';
import { AuthStore, type AuthInfo } from './auth/store.js';
import { Code, EtcdError, Errors } from './errors.js';
import { Lessor, type Lease } from './lease/lessor.js';
import { CompactionStatements } from './mvcc/compactor.js';
import { hashKv } from './mvcc/hash.js';
import { KvStore } from './mvcc/kvstore.js';
import { prepareKv } from './mvcc/statements.js';
import { ResponseHeaders, type ServerIdentity } from './proto/header.js';
import { PRESENT_EMPTY } from './proto/etcd.js';
import type {
  CompactionRequest,
  DeleteRangeRequest,
  DeleteRangeResponse,
  PutRequest,
  PutResponse,
  RangeRequest,
  RangeResponse,
  RequestOp,
  TxnRequest,
  TxnResponse,
} from './proto/types.js';
import { Backend } from './storage/backend.js';
import { GroupCommit, type Batch } from './storage/group-commit.js';
import { WatchHub } from './watch/hub.js';

export const NOSPACE = 1;
export const CORRUPT = 2;

export interface EngineOptions {
  readonly dataDir: string;
  /** Clock for lease deadlines and tokens; tests may move it. */
  readonly now?: () => number;
  /** Called when a storage failure left the in-memory state unusable; the server should stop. */
  readonly onFatal?: (error: unknown) => void;
  /** Where storage failures are told: a library writes nothing to the console itself. @defaultValue silence */
  readonly log?: (level: 'warn' | 'error', message: string) => void;
}

export interface Alarm {
  readonly memberId: bigint;
  readonly alarm: number;
}

/** Whether any branch of a Txn puts (etcd refuses those while the NOSPACE alarm is raised). */
function hasPuts(req: TxnRequest): boolean {
  const any = (ops: RequestOp[]): boolean =>
    ops.some((op) => op.kind === 'put' || (op.kind === 'txn' && hasPuts(op.txn)));
  return any(req.success) || any(req.failure);
}

function randomId(): bigint {
  let id = 0n;
  while (id === 0n) id = randomBytes(8).readBigUInt64BE();
  return id;
}

export class Engine {
  readonly backend: Backend;
  readonly kv: KvStore;
  readonly lessor: Lessor;
  readonly auth: AuthStore;
  readonly hub: WatchHub;
  readonly commit: GroupCommit;
  readonly identity: ServerIdentity;
  readonly header: ResponseHeaders;
  /** Write requests applied since the file was created (the Status raft index). */
  appliedIndex = 0;
  /**
   * The newest revision on disk. Watch responses and answers given after a write stand at it: what lies
   * beyond is committed but not yet synced, and reaches watchers with its notification once it is.
   */
  durableRev = 1;
  /** The compacted revision on disk (watchers are cancelled for a compaction only once it is). */
  durableCompactRev = -1;
  readonly now: () => number;
  private readonly compaction: CompactionStatements;
  private compactionRunning: Promise<void> | null = null;
  private compactionDone = -1;
  private alarms: Alarm[] = [];
  private closed = false;
  private readonly log: (level: 'warn' | 'error', message: string) => void;

  constructor(options: EngineOptions) {
    this.now = options.now ?? Date.now;
    this.log = options.log ?? (() => undefined);
    const backend = Backend.open(options.dataDir);
    this.backend = backend;
    try {
      // A file whose first start did not finish writing its identity gets one now.
      if (backend.created || backend.meta('member_id') === undefined) {
        backend.db.transaction(() => {
          backend.setMetaValue('member_id', randomId().toString());
          backend.setMetaValue('cluster_id', randomId().toString());
          backend.setMetaValue('term', '1');
          backend.setMetaValue('counters', `1,${this.now()},0`);
          backend.setMetaValue('compact_rev', '-1');
          backend.setMetaValue('compact_done', '-1');
          backend.setMetaValue('auth_revision', '1');
          backend.setMetaValue('auth_enabled', '0');
        })();
      }
      // Each start is a new leadership term, as a restarted single-member etcd elects itself again.
      const term = Number(backend.meta('term') ?? '1') + 1;
      backend.setMetaValue('term', String(term));
      this.identity = {
        memberId: BigInt(backend.meta('member_id') ?? '1'),
        clusterId: BigInt(backend.meta('cluster_id') ?? '1'),
        raftTerm: term,
      };
      this.header = new ResponseHeaders(this.identity);
      this.lessor = new Lessor(backend.db, this.identity.memberId, (ids) => this.expireLeases(ids), this.now);
      this.kv = new KvStore(prepareKv(backend.db), this.lessor);
      this.auth = new AuthStore(backend, this.now);
      this.compaction = new CompactionStatements(backend.db);
      this.hub = new WatchHub(this.kv, backend.db, this);
      const onFatal =
        options.onFatal ??
        ((error: unknown) => {
          throw error;
        });
      this.commit = new GroupCommit(backend, {
        beforeCommit: (batch) => this.persistCounters(batch),
        committed: (batch) => {
          const last = batch.revisions.at(-1);
          if (last !== undefined) this.durableRev = last.revision;
          for (const rev of batch.revisions) this.hub.notify(rev);
        },
        failed: (error) => this.recover(error, onFatal),
        fatal: (error) => {
          this.log('error', `cannot sync the database to disk: ${String(error)}`);
          onFatal(error);
        },
      });
      this.load(true);
      // The new term and the leases' shifted deadlines, on disk before the first request.
      backend.syncWalNow();
    } catch (error) {
      backend.close();
      throw error;
    }
  }

  /** Reads the in-memory state from the file (at start, and after a failed batch). */
  private load(starting: boolean): void {
    const backend = this.backend;
    const [rev, aliveAt, applied] = (backend.meta('counters') ?? '1,0,0').split(',').map(Number);
    this.kv.currentRev = rev ?? 1;
    if (starting) this.durableRev = this.kv.currentRev;
    this.appliedIndex = applied ?? 0;
    this.kv.compactRev = Number(backend.meta('compact_rev') ?? '-1');
    if (starting) this.durableCompactRev = this.kv.compactRev;
    this.compactionDone = Number(backend.meta('compact_done') ?? '-1');
    const now = this.now();
    const downtime = starting && aliveAt !== undefined && aliveAt > 0 ? now - aliveAt : 0;
    this.lessor.load(downtime);
    this.auth.load();
    this.alarms = (
      backend.db.prepare('SELECT member, type FROM alarm ORDER BY member, type').raw(true).all() as [string, number][]
    ).map(([member, type]) => ({ memberId: BigInt(member), alarm: type }));
    if (starting) {
      backend.db.transaction(() => {
        this.lessor.persistDeadlines();
        backend.setMetaValue('counters', `${this.kv.currentRev},${now},${this.appliedIndex}`);
      })();
      if (this.compactionDone < this.kv.compactRev) void this.runCompaction(this.kv.compactRev);
    }
  }

  private persistCounters(batch: Batch): void {
    this.appliedIndex += batch.requests;
    this.backend.setMetaValue('counters', `${this.kv.currentRev},${this.now()},${this.appliedIndex}`);
  }

  private recover(error: unknown, onFatal: (error: unknown) => void): void {
    this.log('error', `a write batch failed and was rolled back: ${String(error)}`);
    try {
      this.load(false);
    } catch (reloadError) {
      onFatal(reloadError);
    }
  }

  get currentRev(): number {
    return this.kv.currentRev;
  }

  /** Reads now, and answers (or fails) once what the read saw is on disk. */
  async readDurably<T>(read: () => T): Promise<T> {
    const mark = this.commit.mark;
    let value: T;
    try {
      value = read();
    } catch (error) {
      await this.commit.whenDurable(mark);
      throw error;
    }
    await this.commit.whenDurable(mark);
    return value;
  }

  /** Runs a write in the next batch. */
  write<T>(apply: (batch: Batch) => T): Promise<T> {
    return this.commit.submit(apply);
  }

  private checkSpace(): void {
    if (this.alarms.some((a) => a.alarm === NOSPACE)) throw Errors.noSpace();
  }

  // ---- KV ----

  range(req: RangeRequest, ai: AuthInfo): RangeResponse {
    this.auth.checkRange(ai, req.key, req.rangeEnd);
    return applyRange(this.kv.read(), req);
  }

  put(req: PutRequest, ai: AuthInfo): Promise<PutResponse> {
    return this.write((batch) => {
      this.auth.checkPut(ai, req.key);
      if (req.lease !== 0n) {
        // Moving a key to a lease needs write permission on the lease's other keys too (etcd's checkLeasePuts).
        for (const key of this.lessor.lookup(req.lease)?.keys ?? []) this.auth.checkPut(ai, Buffer.from(key, 'latin1'));
      }
      if (req.prevKv) this.auth.checkRange(ai, req.key, Buffer.alloc(0));
      this.checkSpace();
      if (req.lease !== 0n && this.lessor.lookup(req.lease) === undefined) throw Errors.leaseNotFound();
      const txn = this.kv.write();
      const resp = applyPut(txn, req);
      batch.record(txn.end());
      return resp;
    });
  }

  deleteRange(req: DeleteRangeRequest, ai: AuthInfo): Promise<DeleteRangeResponse> {
    // An explicitly empty range_end does not survive etcd's raft encoding: the delete is of one key.
    if (req.rangeEnd === PRESENT_EMPTY) req.rangeEnd = Buffer.alloc(0);
    return this.write((batch) => {
      this.auth.checkDeleteRange(ai, req.key, req.rangeEnd);
      if (req.prevKv) this.auth.checkRange(ai, req.key, req.rangeEnd);
      const txn = this.kv.write();
      const resp = applyDeleteRange(txn, req);
      batch.record(txn.end());
      return resp;
    });
  }

  private checkTxnAuth(ai: AuthInfo, req: TxnRequest): void {
    if (!this.auth.enabled) return;
    for (const cmp of req.compare) this.auth.checkRange(ai, cmp.key, cmp.rangeEnd);
    const check = (ops: RequestOp[]): void => {
      for (const op of ops) {
        if (op.kind === 'range') this.auth.checkRange(ai, op.range.key, op.range.rangeEnd);
        else if (op.kind === 'put') this.auth.checkPut(ai, op.put.key);
        else if (op.kind === 'delete') {
          if (op.deleteRange.prevKv) this.auth.checkRange(ai, op.deleteRange.key, op.deleteRange.rangeEnd);
          this.auth.checkDeleteRange(ai, op.deleteRange.key, op.deleteRange.rangeEnd);
        } else if (op.kind === 'txn') {
          for (const cmp of op.txn.compare) this.auth.checkRange(ai, cmp.key, cmp.rangeEnd);
          check(op.txn.success);
          check(op.txn.failure);
        }
      }
    };
    check(req.success);
    check(req.failure);
  }

  /** A Txn: answered at once when it only reads, else applied in the next batch. */
  txn(req: TxnRequest, ai: AuthInfo): TxnResponse | Promise<TxnResponse> {
    if (isTxnReadonly(req)) {
      this.checkTxnAuth(ai, req);
      const view = this.kv.read();
      const path = compareToPath(view, req);
      checkRanges(view, req, path);
      const resp = applyTxn(view, null, req, path);
      resp.revision = view.rev;
      return resp;
    }
    asRaftEntry(req);
    return this.write((batch) => {
      this.checkTxnAuth(ai, req);
      if (hasPuts(req)) this.checkSpace();
      const txn = this.kv.write();
      const reader: TxnReader = txn;
      const path = compareToPath(reader, req);
      checkPuts(reader, req, path, this.lessor);
      checkRanges(reader, req, path);
      checkDeletionBudget(txn, req, path);
      const resp = applyTxn(txn, txn, req, path);
      const events = txn.end();
      resp.revision = events === null ? txn.beginRev : events.revision;
      batch.record(events);
      return resp;
    });
  }

  /** Compact: the revision moves at once; old history goes in the background (awaited when `physical`). */
  async compact(req: CompactionRequest): Promise<number> {
    const rev = req.revision;
    await this.write((batch) => {
      if (rev <= this.kv.compactRev) throw Errors.compacted();
      if (rev > this.kv.currentRev) throw Errors.futureRev();
      this.kv.compactRev = rev;
      this.backend.setMetaValue('compact_rev', String(rev));
      batch.afterCommit(() => (this.durableCompactRev = Math.max(this.durableCompactRev, rev)));
    });
    const done = this.runCompaction(rev);
    if (req.physical) await done;
    return this.durableRev;
  }

  /** Runs physical compactions one after another. */
  private runCompaction(rev: number): Promise<void> {
    const previous = this.compactionRunning ?? Promise.resolve();
    const run = previous.then(async () => {
      let from: number | null = 0;
      while (from !== null && !this.closed) {
        const start: number = from;
        from = await this.write(() => {
          const next = this.compaction.step(rev, start);
          if (next === null) {
            this.compactionDone = rev;
            this.backend.setMetaValue('compact_done', String(rev));
          }
          return next;
        });
      }
    });
    const tracked = run.catch((error: unknown) => {
      if (!this.closed) this.log('error', `compaction at ${rev} failed: ${String(error)}`);
    });
    this.compactionRunning = tracked;
    void tracked.then(() => {
      if (this.compactionRunning === tracked) this.compactionRunning = null;
    });
    return tracked;
  }

  hashKv(rev: number): { hash: number; rev: number; compactRev: number } {
    const compactRev = this.kv.compactRev;
    const current = this.kv.currentRev;
    if (rev > 0 && rev <= compactRev) throw Errors.compacted();
    if (rev > 0 && rev > current) throw Errors.futureRev();
    return { hash: hashKv(this.backend.db, rev === 0 ? current : rev, compactRev), rev: current, compactRev };
  }

  // ---- leases ----

  leaseGrant(ttl: number, id: bigint): Promise<Lease> {
    return this.write(() => {
      this.checkSpace();
      return this.lessor.grant(id === 0n ? this.lessor.nextId() : id, ttl);
    });
  }

  /**
   * Grants the in-server dispatcher's session lease, revoking the one the previous run of the server left
   * behind (a run killed without closing): its queue elections would otherwise block dispatching until the
   * lease ran out, though nothing holds them any more.
   */
  sessionLease(ttl: number): Promise<Lease> {
    return this.write((batch) => {
      this.checkSpace();
      const previous = BigInt(this.backend.meta('session_lease') ?? '0');
      if (previous !== 0n && this.lessor.lookup(previous) !== undefined) {
        const txn = this.kv.write();
        this.lessor.revoke(previous, txn);
        batch.record(txn.end());
      }
      const lease = this.lessor.grant(this.lessor.nextId(), ttl);
      this.backend.setMetaValue('session_lease', lease.id.toString());
      return lease;
    });
  }

  /** Revokes the dispatcher's session lease at a clean stop, so its queues' elections end now. */
  endSession(id: bigint): Promise<void> {
    return this.write((batch) => {
      this.backend.setMetaValue('session_lease', '0');
      if (this.lessor.lookup(id) === undefined) return;
      const txn = this.kv.write();
      this.lessor.revoke(id, txn);
      batch.record(txn.end());
    });
  }

  leaseRevoke(id: bigint, ai: AuthInfo): Promise<number> {
    return this.write((batch) => {
      const lease = this.lessor.lookup(id);
      if (lease !== undefined) for (const key of lease.keys) this.auth.checkPut(ai, Buffer.from(key, 'latin1'));
      const txn = this.kv.write();
      this.lessor.revoke(id, txn);
      batch.record(txn.end());
      return this.kv.currentRev;
    });
  }

  /** KeepAlive: the lease's TTL, or 0 when it is gone (etcd answers a lost lease that way). */
  async leaseRenew(id: bigint): Promise<number> {
    try {
      return await this.write(() => this.lessor.renew(id));
    } catch (error) {
      if (error instanceof EtcdError && error.code === Code.NOT_FOUND) return 0;
      throw error;
    }
  }

  private expireLeases(ids: bigint[]): void {
    for (const id of ids) {
      this.write((batch) => {
        if (this.lessor.lookup(id) === undefined) return;
        const txn = this.kv.write();
        this.lessor.revoke(id, txn);
        batch.record(txn.end());
      }).catch(() => this.lessor.retry(id));
    }
  }

  // ---- maintenance ----

  alarmList(): Alarm[] {
    return this.alarms;
  }

  alarm(action: number, memberId: bigint, alarm: number): Promise<Alarm[]> {
    return this.write(() => {
      if (action === 0) return this.alarms.filter((a) => alarm === 0 || a.alarm === alarm);
      const exists = this.alarms.find((a) => a.memberId === memberId && a.alarm === alarm);
      if (action === 1) {
        if (alarm === 0) return [];
        if (exists === undefined) {
          this.alarms = [...this.alarms, { memberId, alarm }];
          this.backend.db.prepare('INSERT INTO alarm (member, type) VALUES (?, ?)').run(memberId.toString(), alarm);
        }
        return [{ memberId, alarm }];
      }
      if (exists === undefined) return [];
      this.alarms = this.alarms.filter((a) => a !== exists);
      this.backend.db.prepare('DELETE FROM alarm WHERE member = ? AND type = ?').run(memberId.toString(), alarm);
      return [exists];
    });
  }

  /** Rewrites the file without free pages (etcd's defrag); writes wait meanwhile. */
  async defragment(): Promise<void> {
    await this.commit.idle();
    this.backend.db.exec('VACUUM');
    await this.commit.committedOutside();
  }

  /** Copies the database to `path`, consistently, without stopping writes. */
  async snapshot(path: string): Promise<void> {
    await this.backend.db.backup(path);
    // The copy may hold batches not yet synced: it goes out once they are on disk.
    await this.commit.settled();
  }

  /** Stops timers, applies what is queued, waits for it to be on disk, and closes the file. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.lessor.stop();
    await this.commit.close();
    this.backend.close();
  }
}
