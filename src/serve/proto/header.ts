/**
 * Response headers, as the generated encoders take them. Top-level responses carry the server's cluster ID,
 * member ID and raft term with the revision (etcd fills them in its gRPC layer); responses nested in a Txn
 * carry the revision alone.
 */
import type { etcdserverpb } from './etcd.js';
import { fromBigInt, type Int64 } from './int64.js';

export interface ServerIdentity {
  readonly clusterId: bigint;
  readonly memberId: bigint;
  readonly raftTerm: number;
}

export type HeaderFields = etcdserverpb.ResponseHeader.$Properties;

export class ResponseHeaders {
  /** The IDs converted once, not per response. */
  private readonly clusterId: Int64;
  private readonly memberId: Int64;

  constructor(readonly identity: ServerIdentity) {
    this.clusterId = fromBigInt(identity.clusterId);
    this.memberId = fromBigInt(identity.memberId);
  }

  /** The header of a top-level response. */
  top(revision: number): HeaderFields {
    return { cluster_id: this.clusterId, member_id: this.memberId, revision, raft_term: this.identity.raftTerm };
  }

  /** The header of a response nested in a Txn (revision 0: an empty header, as etcd's). */
  nested(revision: number): HeaderFields {
    return { revision };
  }
}
