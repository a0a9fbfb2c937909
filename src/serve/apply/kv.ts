/** Put and DeleteRange as etcd's applier runs them, in a write txn (alone or inside a Txn). */
import { Errors } from '../errors.js';
import type { WriteTxn } from '../mvcc/kvstore.js';
import type { DeleteRangeRequest, DeleteRangeResponse, KeyValue, PutRequest, PutResponse } from '../proto/types.js';
import { gteRange } from './range.js';

const CURRENT = { limit: 0, rev: 0, count: false, keysOnly: false };

export function checkPutRequest(req: PutRequest): void {
  if (req.key.length === 0) throw Errors.emptyKey();
  if (req.ignoreValue && req.value.length !== 0) throw Errors.valueProvided();
  if (req.ignoreLease && req.lease !== 0n) throw Errors.leaseProvided();
}

export function checkDeleteRequest(req: DeleteRangeRequest): void {
  if (req.key.length === 0) throw Errors.emptyKey();
}

export function applyPut(txn: WriteTxn, req: PutRequest): PutResponse {
  let prev: KeyValue | null = null;
  if (req.ignoreValue || req.ignoreLease || req.prevKv) prev = txn.range(req.key, null, CURRENT).kvs[0] ?? null;
  if ((req.ignoreValue || req.ignoreLease) && prev === null) throw Errors.keyNotFound();
  const value = req.ignoreValue && prev !== null ? prev.value : req.value;
  const lease = req.ignoreLease && prev !== null ? prev.lease : req.lease;
  const revision = txn.put(req.key, value, lease);
  return { revision, prevKv: req.prevKv ? prev : null };
}

export function applyDeleteRange(txn: WriteTxn, req: DeleteRangeRequest): DeleteRangeResponse {
  const end = gteRange(req.rangeEnd);
  const prevKvs = req.prevKv ? txn.range(req.key, end, CURRENT).kvs : [];
  const { deleted, rev } = txn.deleteRange(req.key, end);
  return { revision: rev, deleted, prevKvs };
}
