/**
 * Txn with etcd's rules: the request is validated (operation counts, empty
 * keys, no key written twice or written and deleted in one branch path), the
 * compares of the outer Txn and of every nested Txn on the chosen path are
 * evaluated against the state before the Txn, the chosen operations are
 * checked (leases exist, read revisions are not compacted or in the future),
 * and only then applied, as one revision if anything changed.
 */
import { Errors } from '../errors.js';
import type { Lessor } from '../lease/lessor.js';
import type { KeyValue, RequestOp, ResponseOp, TxnRequest, TxnResponse } from '../proto/types.js';
import {
  CMP_CREATE,
  CMP_EQUAL,
  CMP_GREATER,
  CMP_LEASE,
  CMP_LESS,
  CMP_MOD,
  CMP_NOT_EQUAL,
  CMP_VALUE,
  CMP_VERSION,
  UNION_CREATE,
  UNION_LEASE,
  UNION_MOD,
  UNION_VALUE,
  UNION_VERSION,
} from '../proto/types.js';
import type { Compare } from '../proto/types.js';
import type { RangeResult, WriteTxn } from '../mvcc/kvstore.js';
import { SUB_LIMIT } from '../storage/schema.js';
import { PRESENT_EMPTY } from '../proto/etcd.js';
import { applyDeleteRange, applyPut, checkDeleteRequest, checkPutRequest } from './kv.js';
import { applyRange, gteRange, type RangeReader } from './range.js';

/** etcd's --max-txn-ops default. */
export const MAX_TXN_OPS = 128;

const EMPTY = Buffer.alloc(0);
const ZERO_KV: KeyValue = { key: EMPTY, createRevision: 0, modRevision: 0, version: 0, value: EMPTY, lease: 0n };

/** What a Txn reads from before it writes: the store as it is. */
export interface TxnReader extends RangeReader {
  readonly rev: number;
  readonly firstRev: number;
}

// ---- validation (before anything is read) ----

export function checkRangeKey(key: Buffer): void {
  if (key.length === 0) throw Errors.emptyKey();
}

function checkRequestOp(op: RequestOp, maxTxnOps: number): void {
  switch (op.kind) {
    case 'range':
      checkRangeKey(op.range.key);
      return;
    case 'put':
      checkPutRequest(op.put);
      return;
    case 'delete':
      checkDeleteRequest(op.deleteRange);
      return;
    case 'txn':
      checkTxnRequest(op.txn, maxTxnOps);
      return;
    case 'none':
      throw Errors.keyNotFound();
  }
}

export function checkTxnRequest(req: TxnRequest, maxTxnOps = MAX_TXN_OPS): void {
  const opc = Math.max(req.compare.length, req.success.length, req.failure.length);
  if (opc > maxTxnOps) throw Errors.tooManyOps();
  for (const cmp of req.compare) if (cmp.key.length === 0) throw Errors.emptyKey();
  for (const op of req.success) checkRequestOp(op, maxTxnOps - opc);
  for (const op of req.failure) checkRequestOp(op, maxTxnOps - opc);
}

// ---- duplicate keys ----

/** A half-open key interval; an empty `end` is past every key. */
interface Interval {
  begin: string;
  end: string;
}

function affine(a: string, b: string): number {
  if (a.length === 0) return b.length === 0 ? 0 : 1;
  if (b.length === 0) return -1;
  return a < b ? -1 : a > b ? 1 : 0;
}

function hitsDeletes(dels: readonly Interval[], key: string): boolean {
  const end = `${key}\0`;
  return dels.some((ivl) => !(affine(key, ivl.begin) < 0 && affine(end, ivl.begin) <= 0) && affine(key, ivl.end) < 0);
}

/** etcd's checkIntervals: the keys a branch puts and the ranges it deletes, or a duplicate-key error. */
function checkIntervals(ops: readonly RequestOp[]): { puts: Set<string>; dels: Interval[] } {
  const dels: Interval[] = [];
  for (const op of ops) {
    if (op.kind !== 'delete') continue;
    const key = op.deleteRange.key.toString('latin1');
    const end = op.deleteRange.rangeEnd.length > 0 ? op.deleteRange.rangeEnd.toString('latin1') : `${key}\0`;
    dels.push({ begin: key, end });
  }
  const puts = new Set<string>();
  for (const op of ops) {
    if (op.kind !== 'txn') continue;
    const then = checkIntervals(op.txn.success);
    const otherwise = checkIntervals(op.txn.failure);
    for (const key of then.puts) {
      if (puts.has(key) || hitsDeletes(dels, key)) throw Errors.duplicateKey();
      puts.add(key);
    }
    for (const key of otherwise.puts) {
      if ((puts.has(key) && !then.puts.has(key)) || hitsDeletes(dels, key)) throw Errors.duplicateKey();
      puts.add(key);
    }
    dels.push(...then.dels, ...otherwise.dels);
  }
  for (const op of ops) {
    if (op.kind !== 'put') continue;
    const key = op.put.key.toString('latin1');
    if (puts.has(key) || hitsDeletes(dels, key)) throw Errors.duplicateKey();
    puts.add(key);
  }
  return { puts, dels };
}

export function checkTxnIntervals(req: TxnRequest): void {
  checkIntervals(req.success);
  checkIntervals(req.failure);
}

// ---- compares ----

function compareNumbers(a: bigint, b: bigint): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function compareKv(cmp: Compare, kv: KeyValue): boolean {
  let result = 0;
  switch (cmp.target) {
    case CMP_VALUE:
      result = Buffer.compare(kv.value, cmp.union === UNION_VALUE ? cmp.value : EMPTY);
      break;
    case CMP_CREATE:
      result = compareNumbers(BigInt(kv.createRevision), cmp.union === UNION_CREATE ? cmp.number : 0n);
      break;
    case CMP_MOD:
      result = compareNumbers(BigInt(kv.modRevision), cmp.union === UNION_MOD ? cmp.number : 0n);
      break;
    case CMP_VERSION:
      result = compareNumbers(BigInt(kv.version), cmp.union === UNION_VERSION ? cmp.number : 0n);
      break;
    case CMP_LEASE:
      result = compareNumbers(kv.lease, cmp.union === UNION_LEASE ? cmp.number : 0n);
      break;
  }
  switch (cmp.result) {
    case CMP_EQUAL:
      return result === 0;
    case CMP_NOT_EQUAL:
      return result !== 0;
    case CMP_GREATER:
      return result > 0;
    case CMP_LESS:
      return result < 0;
    default:
      return true;
  }
}

function applyCompare(reader: TxnReader, cmp: Compare): boolean {
  let rr: RangeResult;
  try {
    rr = reader.range(cmp.key, gteRange(cmp.rangeEnd), {
      limit: 0,
      rev: 0,
      count: false,
      keysOnly: cmp.target !== CMP_VALUE,
    });
  } catch {
    return false;
  }
  if (rr.kvs.length === 0) return cmp.target === CMP_VALUE ? false : compareKv(cmp, ZERO_KV);
  return rr.kvs.every((kv) => compareKv(cmp, kv));
}

/** Which branch each Txn on the chosen path takes, outer first, in the order they are applied. */
export function compareToPath(reader: TxnReader, req: TxnRequest): boolean[] {
  const succeeded = req.compare.every((cmp) => applyCompare(reader, cmp));
  const path = [succeeded];
  for (const op of succeeded ? req.success : req.failure) {
    if (op.kind === 'txn') path.push(...compareToPath(reader, op.txn));
  }
  return path;
}

/** Walks the chosen operations along `path`. */
function visitChosen(
  req: TxnRequest,
  path: readonly boolean[],
  at: { i: number },
  visit: (op: RequestOp) => void,
): void {
  const ops = path[at.i] === true ? req.success : req.failure;
  for (const op of ops) {
    if (op.kind === 'txn') {
      at.i++;
      visitChosen(op.txn, path, at, visit);
    } else visit(op);
  }
}

/** etcd's checkRequests for a writing Txn: ignore_value/ignore_lease keys exist, leases exist. */
export function checkPuts(reader: TxnReader, req: TxnRequest, path: readonly boolean[], lessor: Lessor): void {
  visitChosen(req, path, { i: 0 }, (op) => {
    if (op.kind !== 'put') return;
    const put = op.put;
    if (put.ignoreValue || put.ignoreLease) {
      const rr = reader.range(put.key, null, { limit: 0, rev: 0, count: false, keysOnly: true });
      if (rr.kvs.length === 0) throw Errors.keyNotFound();
    }
    if (put.lease !== 0n && lessor.lookup(put.lease) === undefined) throw Errors.leaseNotFound();
  });
}

/** etcd's checkRequests for reads: their revisions are neither future nor compacted. */
export function checkRanges(reader: TxnReader, req: TxnRequest, path: readonly boolean[]): void {
  visitChosen(req, path, { i: 0 }, (op) => {
    if (op.kind !== 'range' || op.range.revision === 0) return;
    if (op.range.revision > reader.rev) throw Errors.futureRev();
    if (op.range.revision < reader.firstRev) throw Errors.compacted();
  });
}

/** Checks that the chosen deletions fit in one revision's event budget. */
export function checkDeletionBudget(txn: WriteTxn, req: TxnRequest, path: readonly boolean[]): void {
  let events = 0;
  visitChosen(req, path, { i: 0 }, (op) => {
    if (op.kind === 'put') events++;
    else if (op.kind === 'delete' && op.deleteRange.rangeEnd.length > 0) {
      events += txn.countRange(op.deleteRange.key, gteRange(op.deleteRange.rangeEnd));
    } else if (op.kind === 'delete') events++;
  });
  if (events > SUB_LIMIT) throw Errors.requestTooLarge();
}

/**
 * What a write request looks like after etcd's raft round trip: re-encoding
 * drops empty fields, so an explicitly empty range_end becomes an absent one
 * (a single key) in writes, while reads, served without that trip, keep it.
 */
export function asRaftEntry(req: TxnRequest): void {
  for (const cmp of req.compare) if (cmp.rangeEnd === PRESENT_EMPTY) cmp.rangeEnd = EMPTY;
  for (const op of [...req.success, ...req.failure]) {
    if (op.kind === 'range' && op.range.rangeEnd === PRESENT_EMPTY) op.range.rangeEnd = EMPTY;
    else if (op.kind === 'delete' && op.deleteRange.rangeEnd === PRESENT_EMPTY) op.deleteRange.rangeEnd = EMPTY;
    else if (op.kind === 'txn') asRaftEntry(op.txn);
  }
}

export function isTxnReadonly(req: TxnRequest): boolean {
  return req.success.every((op) => op.kind === 'range') && req.failure.every((op) => op.kind === 'range');
}

/** Applies the chosen branches. `txn` is null for a read-only Txn, which only reads through `reader`. */
export function applyTxn(
  reader: RangeReader,
  txn: WriteTxn | null,
  req: TxnRequest,
  path: readonly boolean[],
  at: { i: number } = { i: 0 },
): TxnResponse {
  const succeeded = path[at.i] === true;
  const responses: ResponseOp[] = [];
  for (const op of succeeded ? req.success : req.failure) {
    switch (op.kind) {
      case 'range':
        responses.push({ kind: 'range', range: applyRange(txn ?? reader, op.range) });
        break;
      case 'put':
        if (txn === null) throw new Error('a read-only Txn cannot put');
        responses.push({ kind: 'put', put: applyPut(txn, op.put) });
        break;
      case 'delete':
        if (txn === null) throw new Error('a read-only Txn cannot delete');
        responses.push({ kind: 'delete', deleteRange: applyDeleteRange(txn, op.deleteRange) });
        break;
      case 'txn':
        at.i++;
        // A nested Txn's response header is empty, as etcd's is.
        responses.push({ kind: 'txn', txn: applyTxn(reader, txn, op.txn, path, at) });
        break;
      case 'none':
        break;
    }
  }
  return { revision: 0, succeeded, responses };
}
