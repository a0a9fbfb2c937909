/** The Lease service's messages between the generated codecs and the engine. */
import { decodeMessage } from './decode-error.js';
import { encodeMessage } from './encode.js';
import { etcdserverpb } from './etcd.js';
import type { ResponseHeaders } from './header.js';
import { fromBigInt, toBigInt, toNumber } from './int64.js';
import type { LeaseGrantRequest, LeaseTimeToLiveRequest } from './types.js';

export function decodeLeaseGrantRequest(buf: Buffer): LeaseGrantRequest {
  const m = decodeMessage(etcdserverpb.LeaseGrantRequest, buf);
  return { ttl: toNumber(m.TTL), id: toBigInt(m.ID) };
}

export function decodeLeaseRevokeRequest(buf: Buffer): bigint {
  return toBigInt(decodeMessage(etcdserverpb.LeaseRevokeRequest, buf).ID);
}

export function decodeLeaseKeepAliveRequest(buf: Buffer): bigint {
  return toBigInt(decodeMessage(etcdserverpb.LeaseKeepAliveRequest, buf).ID);
}

export function decodeTimeToLiveRequest(buf: Buffer): LeaseTimeToLiveRequest {
  const m = decodeMessage(etcdserverpb.LeaseTimeToLiveRequest, buf);
  return { id: toBigInt(m.ID), keys: m.keys };
}

export function encodeLeaseGrantResponse(h: ResponseHeaders, revision: number, id: bigint, ttl: number): Buffer {
  const fields = { header: h.top(revision), ID: fromBigInt(id), TTL: ttl };
  return encodeMessage(etcdserverpb.LeaseGrantResponse, fields);
}

export function encodeLeaseRevokeResponse(h: ResponseHeaders, revision: number): Buffer {
  return encodeMessage(etcdserverpb.LeaseRevokeResponse, { header: h.top(revision) });
}

export function encodeLeaseKeepAliveResponse(h: ResponseHeaders, revision: number, id: bigint, ttl: number): Buffer {
  const fields = { header: h.top(revision), ID: fromBigInt(id), TTL: ttl };
  return encodeMessage(etcdserverpb.LeaseKeepAliveResponse, fields);
}

export function encodeTimeToLiveResponse(
  h: ResponseHeaders,
  revision: number,
  lease: { id: bigint; ttl: number; grantedTtl: number; keys: Buffer[] | null },
): Buffer {
  const fields = {
    header: h.top(revision),
    ID: fromBigInt(lease.id),
    TTL: lease.ttl,
    grantedTTL: lease.grantedTtl,
    keys: lease.keys,
  };
  return encodeMessage(etcdserverpb.LeaseTimeToLiveResponse, fields);
}

export function encodeLeaseLeasesResponse(h: ResponseHeaders, revision: number, ids: readonly bigint[]): Buffer {
  const fields = { header: h.top(revision), leases: ids.map((id) => ({ ID: fromBigInt(id) })) };
  return encodeMessage(etcdserverpb.LeaseLeasesResponse, fields);
}
