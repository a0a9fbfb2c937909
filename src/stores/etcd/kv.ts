/**
 * The small key-value port the etcd store and its dispatcher speak: ranges,
 * transactions, watches and one session lease, in etcd v3 terms but with no
 * client library's types. `etcd3-kv.ts` implements it on the npm etcd3
 * client; `kvmq serve` implements it on its own local store, so the same
 * dispatcher code runs in both.
 */

export interface KeyValue {
  /** Keys are byte strings, read as latin1 so any bytes round-trip; kvmq's own keys are ASCII. */
  readonly key: string;
  readonly value: Buffer;
  readonly createRevision: number;
  readonly modRevision: number;
  readonly version: number;
  /** The lease id (decimal), '0' for none. */
  readonly lease: string;
}

export type CompareTarget = 'version' | 'create' | 'mod' | 'value' | 'lease';
export type CompareResult = '=' | '!=' | '<' | '>';

export interface Compare {
  readonly key: string;
  /** Exclusive end (etcd >= 3.3's range_end): every key in [key, end) must pass; an empty range compares as absent. */
  readonly end?: string;
  readonly target: CompareTarget;
  readonly result: CompareResult;
  /** A revision or version number, a value's bytes, or a lease id. */
  readonly operand: number | Buffer | string;
}

export interface RangeOp {
  readonly type: 'range';
  readonly key: string;
  /** Exclusive end of the range; absent for one key. */
  readonly end?: string;
  readonly limit?: number;
  readonly keysOnly?: boolean;
  readonly countOnly?: boolean;
  /** Read as of this revision (a consistent snapshot); absent for the latest. */
  readonly revision?: number;
  /** Only keys last written at or after this revision (etcd's min_mod_revision). */
  readonly minModRevision?: number;
  /** Sorted by mod revision (etcd's sort_target MOD), oldest or newest first; absent: by key. */
  readonly byModRevision?: 'ascend' | 'descend';
}

export interface PutOp {
  readonly type: 'put';
  readonly key: string;
  readonly value: Buffer;
  /** Attach to this lease ('0' or absent: none). */
  readonly lease?: string;
}

export interface DeleteOp {
  readonly type: 'delete';
  readonly key: string;
  readonly end?: string;
}

export type Op = RangeOp | PutOp | DeleteOp;

export interface RangeResult {
  readonly type: 'range';
  readonly kvs: readonly KeyValue[];
  readonly count: number;
  readonly more: boolean;
}

export type OpResult = RangeResult | { readonly type: 'put' } | { readonly type: 'delete'; readonly deleted: number };

export interface TxnRequest {
  readonly compare: readonly Compare[];
  readonly success: readonly Op[];
  readonly failure?: readonly Op[];
}

export interface TxnResult {
  readonly succeeded: boolean;
  /** The store's revision after the transaction (its own revision when it wrote). */
  readonly revision: number;
  readonly responses: readonly OpResult[];
}

export interface WatchEvent {
  readonly type: 'put' | 'delete';
  /** For a delete: the key, with modRevision the revision of the delete. */
  readonly kv: KeyValue;
  readonly prevKv: KeyValue | null;
}

export interface WatchRequest {
  readonly key: string;
  /** Exclusive end; absent for one key. */
  readonly end?: string;
  /** First revision to report. */
  readonly startRevision: number;
  readonly prevKv?: boolean;
}

export interface WatchHandler {
  /** Events in revision order; all events of one revision come in one call. */
  events(events: readonly WatchEvent[]): void;
  /**
   * The watch ended and cannot resume where it was (history compacted, or
   * canceled by the server): the owner must read the state again.
   */
  broken(reason: Error): void;
}

export interface Watch {
  cancel(): Promise<void>;
}

export interface Session {
  /** The lease id (decimal) of this process's session, granted on first use. */
  leaseId(): Promise<string>;
  /** Called once when the lease is lost (expired while unreachable, revoked); a new one is granted on next use. */
  onLost(listener: (leaseId: string) => void): () => void;
  /**
   * Optional: the performance.now() before which the server cannot have ended the lease (the send time of the last
   * acknowledged keep-alive, or of the grant, plus the TTL); -Infinity while there is none. What the session's
   * keys hold (a consumer's registration, so its deliveries) lasts at least that long.
   */
  liveUntil?(): number;
}

export interface Kv {
  range(op: Omit<RangeOp, 'type'>): Promise<RangeResult & { readonly revision: number }>;
  txn(request: TxnRequest): Promise<TxnResult>;
  watch(request: WatchRequest, handler: WatchHandler): Watch;
  readonly session: Session;
}

/** The key is as it was read: still absent (`item` undefined), or not written since (same mod revision). */
export function unchangedSince(key: string, item: KeyValue | undefined): Compare {
  return item === undefined
    ? { key, target: 'version', result: '=', operand: 0 }
    : { key, target: 'mod', result: '=', operand: item.modRevision };
}

/** The smallest key greater than every key starting with `prefix`. */
export function prefixEnd(prefix: string): string {
  const bytes = Buffer.from(prefix, 'latin1');
  for (let i = bytes.length - 1; i >= 0; i--) {
    const byte = bytes[i] ?? 0;
    if (byte < 0xff) {
      const end = Buffer.from(bytes.subarray(0, i + 1));
      end[i] = byte + 1;
      return end.toString('latin1');
    }
  }
  return '\0';
}
