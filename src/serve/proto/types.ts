/**
 * The etcd v3 messages the server handles, as plain objects. Field meanings
 * are etcd's (rpc.proto, kv.proto); names are camelCase.
 */

/** mvccpb.KeyValue. A deletion event carries only `key` and `modRevision`. */
export interface KeyValue {
  key: Buffer;
  createRevision: number;
  modRevision: number;
  version: number;
  value: Buffer;
  lease: bigint;
}

export const EVENT_PUT = 0;
export const EVENT_DELETE = 1;

export interface Event {
  type: number;
  kv: KeyValue;
  prevKv: KeyValue | null;
}

export const SORT_NONE = 0;
export const SORT_ASCEND = 1;
export const SORT_DESCEND = 2;

export const SORT_BY_KEY = 0;
export const SORT_BY_VERSION = 1;
export const SORT_BY_CREATE = 2;
export const SORT_BY_MOD = 3;
export const SORT_BY_VALUE = 4;

export interface RangeRequest {
  key: Buffer;
  rangeEnd: Buffer;
  limit: number;
  revision: number;
  sortOrder: number;
  sortTarget: number;
  serializable: boolean;
  keysOnly: boolean;
  countOnly: boolean;
  minModRevision: number;
  maxModRevision: number;
  minCreateRevision: number;
  maxCreateRevision: number;
}

const EMPTY = Buffer.alloc(0);

/** A RangeRequest with etcd's defaults for everything but the interval. */
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

export interface PutRequest {
  key: Buffer;
  value: Buffer;
  lease: bigint;
  prevKv: boolean;
  ignoreValue: boolean;
  ignoreLease: boolean;
}

export interface DeleteRangeRequest {
  key: Buffer;
  rangeEnd: Buffer;
  prevKv: boolean;
}

/** One operation of a Txn branch; `none` is a RequestOp with no request set. */
export type RequestOp =
  | { kind: 'range'; range: RangeRequest }
  | { kind: 'put'; put: PutRequest }
  | { kind: 'delete'; deleteRange: DeleteRangeRequest }
  | { kind: 'txn'; txn: TxnRequest }
  | { kind: 'none' };

export const CMP_EQUAL = 0;
export const CMP_GREATER = 1;
export const CMP_LESS = 2;
export const CMP_NOT_EQUAL = 3;

export const CMP_VERSION = 0;
export const CMP_CREATE = 1;
export const CMP_MOD = 2;
export const CMP_VALUE = 3;
export const CMP_LEASE = 4;

/** Which member of Compare's target_union was set (its field number), or 0 for none. */
export const UNION_VERSION = 4;
export const UNION_CREATE = 5;
export const UNION_MOD = 6;
export const UNION_VALUE = 7;
export const UNION_LEASE = 8;

export interface Compare {
  result: number;
  target: number;
  key: Buffer;
  rangeEnd: Buffer;
  union: number;
  /** The integer target (version, create/mod revision, lease) when `union` is one of those. */
  number: bigint;
  /** The value target when `union` is UNION_VALUE. */
  value: Buffer;
}

export interface TxnRequest {
  compare: Compare[];
  success: RequestOp[];
  failure: RequestOp[];
}

export interface CompactionRequest {
  revision: number;
  physical: boolean;
}

/**
 * A response header's revision; cluster, member and term are the server's
 * and are added to top-level headers only. Responses nested in a Txn carry
 * the revision alone (0: an empty header), as etcd's do.
 */
export interface RangeResponse {
  revision: number;
  kvs: KeyValue[];
  more: boolean;
  count: number;
  keysOnly: boolean;
}

export interface PutResponse {
  revision: number;
  prevKv: KeyValue | null;
}

export interface DeleteRangeResponse {
  revision: number;
  deleted: number;
  prevKvs: KeyValue[];
}

export type ResponseOp =
  | { kind: 'range'; range: RangeResponse }
  | { kind: 'put'; put: PutResponse }
  | { kind: 'delete'; deleteRange: DeleteRangeResponse }
  | { kind: 'txn'; txn: TxnResponse };

export interface TxnResponse {
  revision: number;
  succeeded: boolean;
  responses: ResponseOp[];
}

export const FILTER_NOPUT = 0;
export const FILTER_NODELETE = 1;

export interface WatchCreateRequest {
  key: Buffer;
  rangeEnd: Buffer;
  startRevision: number;
  progressNotify: boolean;
  filters: number[];
  prevKv: boolean;
  watchId: number;
  fragment: boolean;
}

export type WatchRequest =
  | { kind: 'create'; create: WatchCreateRequest }
  | { kind: 'cancel'; watchId: number }
  | { kind: 'progress' }
  | { kind: 'none' };

export interface WatchResponse {
  revision: number;
  watchId: number;
  created: boolean;
  canceled: boolean;
  compactRevision: number;
  cancelReason: string;
  fragment: boolean;
  events: Event[];
}

export interface LeaseGrantRequest {
  ttl: number;
  id: bigint;
}

export interface LeaseTimeToLiveRequest {
  id: bigint;
  keys: boolean;
}
