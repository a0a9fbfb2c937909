/**
 * The KV service's messages between the generated codecs and the engine's model (types.ts): requests are
 * decoded into it, responses encoded from it through the encoders' plain-object input.
 */
import { asBuffer } from './buffer.js';
import { decodeMessage } from './decode-error.js';
import { encodeMessage } from './encode.js';
import { etcdserverpb, mvccpb } from './etcd.js';
import type { HeaderFields, ResponseHeaders } from './header.js';
import { fromBigInt, toBigInt, toNumber } from './int64.js';
import { EVENT_DELETE } from './types.js';
import type {
  CompactionRequest,
  Compare,
  DeleteRangeRequest,
  DeleteRangeResponse,
  Event,
  KeyValue,
  PutRequest,
  PutResponse,
  RangeRequest,
  RangeResponse,
  RequestOp,
  ResponseOp,
  TxnRequest,
  TxnResponse,
} from './types.js';

// ---- requests ----

// Decoded messages, nested ones too, are typed by their fields (all optional, as the declarations of nested
// messages say); absent fields read as the proto3 defaults.

function rangeRequest(m: etcdserverpb.RangeRequest.$Properties): RangeRequest {
  return {
    key: asBuffer(m.key),
    rangeEnd: asBuffer(m.range_end),
    limit: toNumber(m.limit),
    revision: toNumber(m.revision),
    sortOrder: m.sort_order ?? 0,
    sortTarget: m.sort_target ?? 0,
    serializable: m.serializable === true,
    keysOnly: m.keys_only === true,
    countOnly: m.count_only === true,
    minModRevision: toNumber(m.min_mod_revision),
    maxModRevision: toNumber(m.max_mod_revision),
    minCreateRevision: toNumber(m.min_create_revision),
    maxCreateRevision: toNumber(m.max_create_revision),
  };
}

function putRequest(m: etcdserverpb.PutRequest.$Properties): PutRequest {
  return {
    key: asBuffer(m.key),
    value: asBuffer(m.value),
    lease: toBigInt(m.lease),
    prevKv: m.prev_kv === true,
    ignoreValue: m.ignore_value === true,
    ignoreLease: m.ignore_lease === true,
  };
}

function deleteRangeRequest(m: etcdserverpb.DeleteRangeRequest.$Properties): DeleteRangeRequest {
  return { key: asBuffer(m.key), rangeEnd: asBuffer(m.range_end), prevKv: m.prev_kv === true };
}

/** Compare's target_union by the field number the engine knows it by (types.ts UNION_*). */
const UNION_FIELDS = { version: 4, create_revision: 5, mod_revision: 6, value: 7, lease: 8 } as const;

function compare(m: etcdserverpb.Compare.$Properties): Compare {
  const set = m.target_union;
  const union = set === undefined ? 0 : UNION_FIELDS[set];
  const number = set === undefined || set === 'value' ? 0n : toBigInt(m[set]);
  return {
    result: m.result ?? 0,
    target: m.target ?? 0,
    key: asBuffer(m.key),
    rangeEnd: asBuffer(m.range_end),
    union,
    number,
    value: asBuffer(m.value),
  };
}

function requestOp(m: etcdserverpb.RequestOp.$Properties): RequestOp {
  switch (m.request) {
    case 'request_range':
      return { kind: 'range', range: rangeRequest(m.request_range ?? {}) };
    case 'request_put':
      return { kind: 'put', put: putRequest(m.request_put ?? {}) };
    case 'request_delete_range':
      return { kind: 'delete', deleteRange: deleteRangeRequest(m.request_delete_range ?? {}) };
    case 'request_txn':
      return { kind: 'txn', txn: txnRequest(m.request_txn ?? {}) };
    default:
      return { kind: 'none' };
  }
}

function txnRequest(m: etcdserverpb.TxnRequest.$Properties): TxnRequest {
  return {
    compare: (m.compare ?? []).map(compare),
    success: (m.success ?? []).map(requestOp),
    failure: (m.failure ?? []).map(requestOp),
  };
}

export function decodeRangeRequest(buf: Buffer): RangeRequest {
  return rangeRequest(decodeMessage(etcdserverpb.RangeRequest, buf));
}

export function decodePutRequest(buf: Buffer): PutRequest {
  return putRequest(decodeMessage(etcdserverpb.PutRequest, buf));
}

export function decodeDeleteRangeRequest(buf: Buffer): DeleteRangeRequest {
  return deleteRangeRequest(decodeMessage(etcdserverpb.DeleteRangeRequest, buf));
}

export function decodeTxnRequest(buf: Buffer): TxnRequest {
  return txnRequest(decodeMessage(etcdserverpb.TxnRequest, buf));
}

export function decodeCompactionRequest(buf: Buffer): CompactionRequest {
  const m = decodeMessage(etcdserverpb.CompactionRequest, buf);
  return { revision: toNumber(m.revision), physical: m.physical };
}

// ---- KeyValue and Event ----

function kvFields(kv: KeyValue, withValue = true): mvccpb.KeyValue.$Properties {
  return {
    key: kv.key,
    create_revision: kv.createRevision,
    mod_revision: kv.modRevision,
    version: kv.version,
    value: withValue ? kv.value : null,
    lease: kv.lease === 0n ? 0 : fromBigInt(kv.lease),
  };
}

/** Encodes a KeyValue alone, as etcd stores it (used by HashKV). */
export function encodeKv(kv: KeyValue): Buffer {
  return encodeMessage(mvccpb.KeyValue, kvFields(kv));
}

export function eventFields(ev: Event): mvccpb.Event.$Properties {
  return { type: ev.type === EVENT_DELETE ? mvccpb.Event.EventType.Delete : mvccpb.Event.EventType.Put, kv: kvFields(ev.kv), prev_kv: ev.prevKv === null ? null : kvFields(ev.prevKv) };
}

// ---- responses ----

function rangeFields(header: HeaderFields, resp: RangeResponse): etcdserverpb.RangeResponse.$Properties {
  const withValue = !resp.keysOnly;
  return { header, kvs: resp.kvs.map((kv) => kvFields(kv, withValue)), more: resp.more, count: resp.count };
}

function putFields(header: HeaderFields, resp: PutResponse): etcdserverpb.PutResponse.$Properties {
  return { header, prev_kv: resp.prevKv === null ? null : kvFields(resp.prevKv) };
}

function deleteFields(header: HeaderFields, resp: DeleteRangeResponse): etcdserverpb.DeleteRangeResponse.$Properties {
  return { header, deleted: resp.deleted, prev_kvs: resp.prevKvs.map((kv) => kvFields(kv)) };
}

function opFields(h: ResponseHeaders, op: ResponseOp): etcdserverpb.ResponseOp.$Properties {
  switch (op.kind) {
    case 'range':
      return { response_range: rangeFields(h.nested(op.range.revision), op.range) };
    case 'put':
      return { response_put: putFields(h.nested(op.put.revision), op.put) };
    case 'delete':
      return { response_delete_range: deleteFields(h.nested(op.deleteRange.revision), op.deleteRange) };
    case 'txn':
      return { response_txn: txnFields(h, h.nested(op.txn.revision), op.txn) };
  }
}

function txnFields(
  h: ResponseHeaders,
  header: HeaderFields,
  resp: TxnResponse,
): etcdserverpb.TxnResponse.$Properties {
  return { header, succeeded: resp.succeeded, responses: resp.responses.map((op) => opFields(h, op)) };
}

export function encodeRangeResponse(h: ResponseHeaders, resp: RangeResponse): Buffer {
  return encodeMessage(etcdserverpb.RangeResponse, rangeFields(h.top(resp.revision), resp));
}

export function encodePutResponse(h: ResponseHeaders, resp: PutResponse): Buffer {
  return encodeMessage(etcdserverpb.PutResponse, putFields(h.top(resp.revision), resp));
}

export function encodeDeleteRangeResponse(h: ResponseHeaders, resp: DeleteRangeResponse): Buffer {
  return encodeMessage(etcdserverpb.DeleteRangeResponse, deleteFields(h.top(resp.revision), resp));
}

export function encodeTxnResponse(h: ResponseHeaders, resp: TxnResponse): Buffer {
  return encodeMessage(etcdserverpb.TxnResponse, txnFields(h, h.top(resp.revision), resp));
}

export function encodeCompactionResponse(h: ResponseHeaders, revision: number): Buffer {
  return encodeMessage(etcdserverpb.CompactionResponse, { header: h.top(revision) });
}
