/** The Lease service's messages. */
import type { HeaderCodec } from './header.js';
import type { LeaseGrantRequest, LeaseTimeToLiveRequest } from './types.js';
import { lenFieldSize, Reader, varintSize, varintSizeBig, WIRE_LEN, WIRE_VARINT, Writer } from './wire.js';

export function decodeLeaseGrantRequest(buf: Buffer): LeaseGrantRequest {
  const r = new Reader(buf);
  const req: LeaseGrantRequest = { ttl: 0, id: 0n };
  while (!r.done) {
    const tag = r.tag();
    if (tag === ((1 << 3) | WIRE_VARINT)) req.ttl = r.int64();
    else if (tag === ((2 << 3) | WIRE_VARINT)) req.id = r.int64Big();
    else r.skip(tag & 7);
  }
  return req;
}

/** LeaseRevokeRequest and LeaseKeepAliveRequest: the lease ID in field 1. */
export function decodeLeaseId(buf: Buffer): bigint {
  const r = new Reader(buf);
  let id = 0n;
  while (!r.done) {
    const tag = r.tag();
    if (tag === ((1 << 3) | WIRE_VARINT)) id = r.int64Big();
    else r.skip(tag & 7);
  }
  return id;
}

export function decodeTimeToLiveRequest(buf: Buffer): LeaseTimeToLiveRequest {
  const r = new Reader(buf);
  const req: LeaseTimeToLiveRequest = { id: 0n, keys: false };
  while (!r.done) {
    const tag = r.tag();
    if (tag === ((1 << 3) | WIRE_VARINT)) req.id = r.int64Big();
    else if (tag === ((2 << 3) | WIRE_VARINT)) req.keys = r.bool();
    else r.skip(tag & 7);
  }
  return req;
}

function idSize(id: bigint): number {
  return id !== 0n ? 1 + varintSizeBig(id) : 0;
}

function numSize(n: number): number {
  return n !== 0 ? 1 + varintSize(n) : 0;
}

/** LeaseGrantResponse, LeaseKeepAliveResponse and LeaseTimeToLiveResponse share fields 1-3. */
export function encodeLeaseResponse(
  h: HeaderCodec,
  revision: number,
  id: bigint,
  ttl: number,
  extra?: { grantedTtl: number; keys: Buffer[] | null },
): Buffer {
  let size = h.fieldSize(revision, true) + idSize(id) + numSize(ttl);
  if (extra !== undefined) {
    size += numSize(extra.grantedTtl);
    for (const key of extra.keys ?? []) size += lenFieldSize(key.length);
  }
  const w = new Writer(size);
  h.write(w, revision, true);
  if (id !== 0n) {
    w.tag(2, WIRE_VARINT);
    w.big(id);
  }
  if (ttl !== 0) {
    w.tag(3, WIRE_VARINT);
    w.uint(ttl);
  }
  if (extra !== undefined) {
    if (extra.grantedTtl !== 0) {
      w.tag(4, WIRE_VARINT);
      w.uint(extra.grantedTtl);
    }
    for (const key of extra.keys ?? []) {
      w.tag(5, WIRE_LEN);
      w.bytes(key);
    }
  }
  return w.finish();
}

export function encodeLeaseLeasesResponse(h: HeaderCodec, revision: number, ids: readonly bigint[]): Buffer {
  let size = h.fieldSize(revision, true);
  for (const id of ids) {
    const inner = idSize(id);
    size += 1 + varintSize(inner) + inner;
  }
  const w = new Writer(size);
  h.write(w, revision, true);
  for (const id of ids) {
    w.tag(2, WIRE_LEN);
    w.uint(idSize(id));
    if (id !== 0n) {
      w.tag(1, WIRE_VARINT);
      w.big(id);
    }
  }
  return w.finish();
}
