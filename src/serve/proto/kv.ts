/** The KV service's messages: Range, Put, DeleteRange, Txn and Compact, plus KeyValue and Event. */
import type { HeaderCodec } from './header.js';
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
import { lenFieldSize, Reader, varintSize, varintSizeBig, WIRE_LEN, WIRE_VARINT, Writer } from './wire.js';

const EMPTY = Buffer.alloc(0);

/**
 * A range_end sent explicitly empty. etcd tells it apart from an absent one:
 * its decoder gives a non-nil empty slice, which reads as "every key from
 * `key` on", as "\0" does (a client library sends an empty range_end only if
 * asked to, but a protobuf library may encode one when the field is set).
 */
export const PRESENT_EMPTY: Buffer = Buffer.alloc(0);

function rangeEnd(r: Reader): Buffer {
  const end = r.bytes();
  return end.length === 0 ? PRESENT_EMPTY : end;
}

// ---- decoding requests ----

export function newRangeRequest(key: Buffer = EMPTY, rangeEnd: Buffer = EMPTY): RangeRequest {
  return {
    key,
    rangeEnd,
    limit: 0,
    revision: 0,
    sortOrder: 0,
    sortTarget: 0,
    serializable: false,
    keysOnly: false,
    countOnly: false,
    minModRevision: 0,
    maxModRevision: 0,
    minCreateRevision: 0,
    maxCreateRevision: 0,
  };
}

export function readRangeRequest(r: Reader): RangeRequest {
  const req = newRangeRequest();
  while (!r.done) {
    const tag = r.tag();
    switch (tag) {
      case (1 << 3) | WIRE_LEN:
        req.key = r.bytes();
        break;
      case (2 << 3) | WIRE_LEN:
        req.rangeEnd = rangeEnd(r);
        break;
      case (3 << 3) | WIRE_VARINT:
        req.limit = r.int64();
        break;
      case (4 << 3) | WIRE_VARINT:
        req.revision = r.int64();
        break;
      case (5 << 3) | WIRE_VARINT:
        req.sortOrder = r.uint32() | 0;
        break;
      case (6 << 3) | WIRE_VARINT:
        req.sortTarget = r.uint32() | 0;
        break;
      case (7 << 3) | WIRE_VARINT:
        req.serializable = r.bool();
        break;
      case (8 << 3) | WIRE_VARINT:
        req.keysOnly = r.bool();
        break;
      case (9 << 3) | WIRE_VARINT:
        req.countOnly = r.bool();
        break;
      case (10 << 3) | WIRE_VARINT:
        req.minModRevision = r.int64();
        break;
      case (11 << 3) | WIRE_VARINT:
        req.maxModRevision = r.int64();
        break;
      case (12 << 3) | WIRE_VARINT:
        req.minCreateRevision = r.int64();
        break;
      case (13 << 3) | WIRE_VARINT:
        req.maxCreateRevision = r.int64();
        break;
      default:
        r.skip(tag & 7);
    }
  }
  return req;
}

export function readPutRequest(r: Reader): PutRequest {
  const req: PutRequest = {
    key: EMPTY,
    value: EMPTY,
    lease: 0n,
    prevKv: false,
    ignoreValue: false,
    ignoreLease: false,
  };
  while (!r.done) {
    const tag = r.tag();
    switch (tag) {
      case (1 << 3) | WIRE_LEN:
        req.key = r.bytes();
        break;
      case (2 << 3) | WIRE_LEN:
        req.value = r.bytes();
        break;
      case (3 << 3) | WIRE_VARINT:
        req.lease = r.int64Big();
        break;
      case (4 << 3) | WIRE_VARINT:
        req.prevKv = r.bool();
        break;
      case (5 << 3) | WIRE_VARINT:
        req.ignoreValue = r.bool();
        break;
      case (6 << 3) | WIRE_VARINT:
        req.ignoreLease = r.bool();
        break;
      default:
        r.skip(tag & 7);
    }
  }
  return req;
}

export function readDeleteRangeRequest(r: Reader): DeleteRangeRequest {
  const req: DeleteRangeRequest = { key: EMPTY, rangeEnd: EMPTY, prevKv: false };
  while (!r.done) {
    const tag = r.tag();
    switch (tag) {
      case (1 << 3) | WIRE_LEN:
        req.key = r.bytes();
        break;
      case (2 << 3) | WIRE_LEN:
        req.rangeEnd = rangeEnd(r);
        break;
      case (3 << 3) | WIRE_VARINT:
        req.prevKv = r.bool();
        break;
      default:
        r.skip(tag & 7);
    }
  }
  return req;
}

function readCompare(r: Reader): Compare {
  const cmp: Compare = { result: 0, target: 0, key: EMPTY, rangeEnd: EMPTY, union: 0, number: 0n, value: EMPTY };
  while (!r.done) {
    const tag = r.tag();
    const field = tag >>> 3;
    switch (tag) {
      case (1 << 3) | WIRE_VARINT:
        cmp.result = r.uint32() | 0;
        break;
      case (2 << 3) | WIRE_VARINT:
        cmp.target = r.uint32() | 0;
        break;
      case (3 << 3) | WIRE_LEN:
        cmp.key = r.bytes();
        break;
      case (4 << 3) | WIRE_VARINT:
      case (5 << 3) | WIRE_VARINT:
      case (6 << 3) | WIRE_VARINT:
      case (8 << 3) | WIRE_VARINT:
        cmp.union = field;
        cmp.number = r.int64Big();
        break;
      case (7 << 3) | WIRE_LEN:
        cmp.union = field;
        cmp.value = r.bytes();
        break;
      case (64 << 3) | WIRE_LEN:
        cmp.rangeEnd = rangeEnd(r);
        break;
      default:
        r.skip(tag & 7);
    }
  }
  return cmp;
}

function readRequestOp(r: Reader): RequestOp {
  let op: RequestOp = { kind: 'none' };
  while (!r.done) {
    const tag = r.tag();
    switch (tag) {
      case (1 << 3) | WIRE_LEN:
        op = { kind: 'range', range: readRangeRequest(r.message()) };
        break;
      case (2 << 3) | WIRE_LEN:
        op = { kind: 'put', put: readPutRequest(r.message()) };
        break;
      case (3 << 3) | WIRE_LEN:
        op = { kind: 'delete', deleteRange: readDeleteRangeRequest(r.message()) };
        break;
      case (4 << 3) | WIRE_LEN:
        op = { kind: 'txn', txn: readTxnRequest(r.message()) };
        break;
      default:
        r.skip(tag & 7);
    }
  }
  return op;
}

export function readTxnRequest(r: Reader): TxnRequest {
  const txn: TxnRequest = { compare: [], success: [], failure: [] };
  while (!r.done) {
    const tag = r.tag();
    switch (tag) {
      case (1 << 3) | WIRE_LEN:
        txn.compare.push(readCompare(r.message()));
        break;
      case (2 << 3) | WIRE_LEN:
        txn.success.push(readRequestOp(r.message()));
        break;
      case (3 << 3) | WIRE_LEN:
        txn.failure.push(readRequestOp(r.message()));
        break;
      default:
        r.skip(tag & 7);
    }
  }
  return txn;
}

export function readCompactionRequest(r: Reader): CompactionRequest {
  const req: CompactionRequest = { revision: 0, physical: false };
  while (!r.done) {
    const tag = r.tag();
    switch (tag) {
      case (1 << 3) | WIRE_VARINT:
        req.revision = r.int64();
        break;
      case (2 << 3) | WIRE_VARINT:
        req.physical = r.bool();
        break;
      default:
        r.skip(tag & 7);
    }
  }
  return req;
}

// ---- encoding KeyValue and Event ----

export function kvSize(kv: KeyValue, withValue = true): number {
  let size = 0;
  if (kv.key.length > 0) size += lenFieldSize(kv.key.length);
  if (kv.createRevision !== 0) size += 1 + varintSize(kv.createRevision);
  if (kv.modRevision !== 0) size += 1 + varintSize(kv.modRevision);
  if (kv.version !== 0) size += 1 + varintSize(kv.version);
  if (withValue && kv.value.length > 0) size += lenFieldSize(kv.value.length);
  if (kv.lease !== 0n) size += 1 + varintSizeBig(kv.lease);
  return size;
}

export function writeKv(w: Writer, kv: KeyValue, withValue = true): void {
  if (kv.key.length > 0) {
    w.tag(1, WIRE_LEN);
    w.bytes(kv.key);
  }
  if (kv.createRevision !== 0) {
    w.tag(2, WIRE_VARINT);
    w.uint(kv.createRevision);
  }
  if (kv.modRevision !== 0) {
    w.tag(3, WIRE_VARINT);
    w.uint(kv.modRevision);
  }
  if (kv.version !== 0) {
    w.tag(4, WIRE_VARINT);
    w.uint(kv.version);
  }
  if (withValue && kv.value.length > 0) {
    w.tag(5, WIRE_LEN);
    w.bytes(kv.value);
  }
  if (kv.lease !== 0n) {
    w.tag(6, WIRE_VARINT);
    w.big(kv.lease);
  }
}

/** A KeyValue as an embedded field (tag, length, body). */
export function kvFieldSize(kv: KeyValue, withValue = true): number {
  const size = kvSize(kv, withValue);
  return 1 + varintSize(size) + size;
}

export function writeKvField(w: Writer, field: number, kv: KeyValue, withValue = true): void {
  w.tag(field, WIRE_LEN);
  w.uint(kvSize(kv, withValue));
  writeKv(w, kv, withValue);
}

/** Encodes a KeyValue alone, as etcd stores it (used by HashKV). */
export function encodeKv(kv: KeyValue): Buffer {
  const w = new Writer(kvSize(kv));
  writeKv(w, kv);
  return w.finish();
}

export function eventSize(ev: Event): number {
  let size = 0;
  if (ev.type !== 0) size += 1 + varintSize(ev.type);
  size += kvFieldSize(ev.kv);
  if (ev.prevKv !== null) size += kvFieldSize(ev.prevKv);
  return size;
}

export function writeEvent(w: Writer, ev: Event): void {
  if (ev.type !== 0) {
    w.tag(1, WIRE_VARINT);
    w.uint(ev.type);
  }
  writeKvField(w, 2, ev.kv);
  if (ev.prevKv !== null) writeKvField(w, 3, ev.prevKv);
}

// ---- encoding responses ----

function rangeBody(h: HeaderCodec, resp: RangeResponse, full: boolean): number {
  let size = h.fieldSize(resp.revision, full);
  const withValue = !resp.keysOnly;
  for (const kv of resp.kvs) size += kvFieldSize(kv, withValue);
  if (resp.more) size += 2;
  if (resp.count !== 0) size += 1 + varintSize(resp.count);
  return size;
}

function writeRange(w: Writer, h: HeaderCodec, resp: RangeResponse, full: boolean): void {
  h.write(w, resp.revision, full);
  const withValue = !resp.keysOnly;
  for (const kv of resp.kvs) writeKvField(w, 2, kv, withValue);
  if (resp.more) {
    w.tag(3, WIRE_VARINT);
    w.uint(1);
  }
  if (resp.count !== 0) {
    w.tag(4, WIRE_VARINT);
    w.uint(resp.count);
  }
}

function putBody(h: HeaderCodec, resp: PutResponse, full: boolean): number {
  let size = h.fieldSize(resp.revision, full);
  if (resp.prevKv !== null) size += kvFieldSize(resp.prevKv);
  return size;
}

function writePut(w: Writer, h: HeaderCodec, resp: PutResponse, full: boolean): void {
  h.write(w, resp.revision, full);
  if (resp.prevKv !== null) writeKvField(w, 2, resp.prevKv);
}

function deleteBody(h: HeaderCodec, resp: DeleteRangeResponse, full: boolean): number {
  let size = h.fieldSize(resp.revision, full);
  if (resp.deleted !== 0) size += 1 + varintSize(resp.deleted);
  for (const kv of resp.prevKvs) size += kvFieldSize(kv);
  return size;
}

function writeDelete(w: Writer, h: HeaderCodec, resp: DeleteRangeResponse, full: boolean): void {
  h.write(w, resp.revision, full);
  if (resp.deleted !== 0) {
    w.tag(2, WIRE_VARINT);
    w.uint(resp.deleted);
  }
  for (const kv of resp.prevKvs) writeKvField(w, 3, kv);
}

function opBody(h: HeaderCodec, op: ResponseOp): number {
  switch (op.kind) {
    case 'range':
      return rangeBody(h, op.range, false);
    case 'put':
      return putBody(h, op.put, false);
    case 'delete':
      return deleteBody(h, op.deleteRange, false);
    case 'txn':
      return txnBody(h, op.txn, false);
  }
}

const OP_FIELD = { range: 1, put: 2, delete: 3, txn: 4 } as const;

function txnBody(h: HeaderCodec, resp: TxnResponse, full: boolean): number {
  let size = h.fieldSize(resp.revision, full);
  if (resp.succeeded) size += 2;
  for (const op of resp.responses) {
    const inner = opBody(h, op);
    const opSize = 1 + varintSize(inner) + inner;
    size += 1 + varintSize(opSize) + opSize;
  }
  return size;
}

function writeTxn(w: Writer, h: HeaderCodec, resp: TxnResponse, full: boolean): void {
  h.write(w, resp.revision, full);
  if (resp.succeeded) {
    w.tag(2, WIRE_VARINT);
    w.uint(1);
  }
  for (const op of resp.responses) {
    const inner = opBody(h, op);
    w.tag(3, WIRE_LEN);
    w.uint(1 + varintSize(inner) + inner);
    w.tag(OP_FIELD[op.kind], WIRE_LEN);
    w.uint(inner);
    switch (op.kind) {
      case 'range':
        writeRange(w, h, op.range, false);
        break;
      case 'put':
        writePut(w, h, op.put, false);
        break;
      case 'delete':
        writeDelete(w, h, op.deleteRange, false);
        break;
      case 'txn':
        writeTxn(w, h, op.txn, false);
        break;
    }
  }
}

export function encodeRangeResponse(h: HeaderCodec, resp: RangeResponse): Buffer {
  const w = new Writer(rangeBody(h, resp, true));
  writeRange(w, h, resp, true);
  return w.finish();
}

export function encodePutResponse(h: HeaderCodec, resp: PutResponse): Buffer {
  const w = new Writer(putBody(h, resp, true));
  writePut(w, h, resp, true);
  return w.finish();
}

export function encodeDeleteRangeResponse(h: HeaderCodec, resp: DeleteRangeResponse): Buffer {
  const w = new Writer(deleteBody(h, resp, true));
  writeDelete(w, h, resp, true);
  return w.finish();
}

export function encodeTxnResponse(h: HeaderCodec, resp: TxnResponse): Buffer {
  const w = new Writer(txnBody(h, resp, true));
  writeTxn(w, h, resp, true);
  return w.finish();
}
