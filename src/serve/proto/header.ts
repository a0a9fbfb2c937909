/**
 * ResponseHeader encoding. Top-level responses carry the server's cluster ID,
 * member ID and raft term with the revision (etcd fills them in its gRPC
 * layer); responses nested in a Txn carry the revision alone.
 */
import { varintSize, varintSizeBig, WIRE_LEN, WIRE_VARINT, Writer } from './wire.js';

export interface ServerIdentity {
  readonly clusterId: bigint;
  readonly memberId: bigint;
  readonly raftTerm: number;
}

export class HeaderCodec {
  /** cluster_id and member_id, encoded once. */
  private readonly prefix: Buffer;
  private readonly termSize: number;

  constructor(readonly identity: ServerIdentity) {
    const { clusterId, memberId } = identity;
    const size =
      (clusterId !== 0n ? 1 + varintSizeBig(clusterId) : 0) + (memberId !== 0n ? 1 + varintSizeBig(memberId) : 0);
    const w = new Writer(size);
    if (clusterId !== 0n) {
      w.tag(1, WIRE_VARINT);
      w.big(clusterId);
    }
    if (memberId !== 0n) {
      w.tag(2, WIRE_VARINT);
      w.big(memberId);
    }
    this.prefix = w.finish();
    this.termSize = identity.raftTerm !== 0 ? 1 + varintSize(identity.raftTerm) : 0;
  }

  /** Size of the header's body (without field tag and length). */
  bodySize(revision: number, full: boolean): number {
    const rev = revision !== 0 ? 1 + varintSize(revision) : 0;
    return full ? this.prefix.length + rev + this.termSize : rev;
  }

  /** Size of field 1 holding the header. */
  fieldSize(revision: number, full: boolean): number {
    const body = this.bodySize(revision, full);
    return 1 + varintSize(body) + body;
  }

  /** Writes field 1 (the header) of a response. */
  write(w: Writer, revision: number, full: boolean): void {
    w.tag(1, WIRE_LEN);
    w.uint(this.bodySize(revision, full));
    if (full) w.raw(this.prefix);
    if (revision !== 0) {
      w.tag(3, WIRE_VARINT);
      w.uint(revision);
    }
    if (full && this.identity.raftTerm !== 0) {
      w.tag(4, WIRE_VARINT);
      w.uint(this.identity.raftTerm);
    }
  }

  /** A response that is only a header (Compaction, LeaseRevoke, ...). */
  headerOnly(revision: number): Buffer {
    const w = new Writer(this.fieldSize(revision, true));
    this.write(w, revision, true);
    return w.finish();
  }
}
