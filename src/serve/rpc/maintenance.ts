/** The Maintenance and Cluster services. */
import { createHash, randomBytes } from 'node:crypto';
import { open, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AuthInfo } from '../auth/store.js';
import { CORRUPT, NOSPACE, type Engine } from '../engine.js';
import { Code, EtcdError } from '../errors.js';
import { hashKv } from '../mvcc/hash.js';
import { encodeMessage } from '../proto/encode.js';
import { etcdserverpb as pb } from '../proto/etcd.js';
import { fromBigInt, toBigInt, toNumber } from '../proto/int64.js';
import type { CallContext, Method, RpcSettings } from './method.js';
import { messageMethod } from './message-method.js';

/** etcd's snapshotSendBufferSize. */
const SNAPSHOT_CHUNK = 32 * 1024;
const SNAPSHOT_BACKLOG = 4 * 1024 * 1024;

const RAW_AUTH_ERRORS: Record<string, string> = {
  'etcdserver: invalid auth token': 'auth: invalid auth token',
  'etcdserver: user name is empty': 'auth: user name is empty',
  'etcdserver: user name not found': 'auth: user not found',
  'etcdserver: permission denied': 'auth: permission denied',
};

const ALARM_NAMES: Record<number, string> = { 0: 'NONE', [NOSPACE]: 'NOSPACE', [CORRUPT]: 'CORRUPT' };

export function maintenanceMethods(engine: Engine, settings: RpcSettings): Record<string, Method> {
  const header = (revision = engine.currentRev): pb.ResponseHeader.$Properties => engine.header.top(revision);
  // etcd's maintenance server passes auth errors on unconverted: code Unknown, the auth package's text.
  const admin = (call: CallContext): AuthInfo => {
    try {
      const ai = engine.auth.authInfo(call.token);
      engine.auth.checkAdmin(ai);
      return ai;
    } catch (error) {
      if (error instanceof EtcdError) {
        const raw = RAW_AUTH_ERRORS[error.message];
        if (raw !== undefined) throw new EtcdError(Code.UNKNOWN, raw);
      }
      throw error;
    }
  };
  return {
    Alarm: messageMethod(pb.AlarmRequest, pb.AlarmResponse, async (req, call) => {
      engine.auth.authInfo(call.token);
      const alarms = await engine.alarm(req.action, toBigInt(req.memberID), req.alarm);
      // etcd's AlarmResponse carries no header.
      return { alarms: alarms.map((a) => ({ memberID: fromBigInt(a.memberId), alarm: a.alarm })) };
    }),
    Status: messageMethod(pb.StatusRequest, pb.StatusResponse, () => {
      const { size, inUse } = engine.backend.sizes();
      const member = engine.identity.memberId;
      return {
        header: header(),
        version: settings.version,
        dbSize: size,
        leader: fromBigInt(member),
        raftIndex: engine.appliedIndex,
        raftTerm: engine.identity.raftTerm,
        raftAppliedIndex: engine.appliedIndex,
        errors: engine
          .alarmList()
          .map((a) => `memberID:${a.memberId.toString()} alarm:${ALARM_NAMES[a.alarm] ?? String(a.alarm)} `),
        dbSizeInUse: inUse,
        isLearner: false,
      };
    }),
    Defragment: messageMethod(pb.DefragmentRequest, pb.DefragmentResponse, async (_req, call) => {
      admin(call);
      await engine.defragment();
      // etcd's DefragmentResponse carries no header.
      return {};
    }),
    Hash: messageMethod(pb.HashRequest, pb.HashResponse, (_req, call) => {
      admin(call);
      const hash = hashKv(engine.backend.db, engine.currentRev, -1);
      return { header: header(), hash };
    }),
    HashKV: messageMethod(pb.HashKVRequest, pb.HashKVResponse, (req, call) => {
      admin(call);
      const result = engine.hashKv(toNumber(req.revision));
      return {
        header: header(result.rev),
        hash: result.hash,
        compact_revision: result.compactRev,
      };
    }),
    MoveLeader: messageMethod(pb.MoveLeaderRequest, pb.MoveLeaderResponse, (req, call) => {
      admin(call);
      if (toBigInt(req.targetID) !== engine.identity.memberId) {
        throw new EtcdError(Code.FAILED_PRECONDITION, 'etcdserver: bad leader transferee');
      }
      return {};
    }),
    Snapshot: snapshotMethod(engine, admin),
  };
}

export function clusterMethods(engine: Engine, settings: RpcSettings): Record<string, Method> {
  const single = (): never => {
    throw new EtcdError(Code.UNIMPLEMENTED, 'kvmq serve runs as a single member and cannot change membership');
  };
  return {
    MemberList: messageMethod(pb.MemberListRequest, pb.MemberListResponse, () => ({
      // etcd's cluster responses carry no revision.
      header: engine.header.top(0),
      members: [
        {
          ID: fromBigInt(engine.identity.memberId),
          name: settings.name,
          peerURLs: [],
          clientURLs: [...settings.clientUrls],
          isLearner: false,
        },
      ],
    })),
    MemberAdd: messageMethod(pb.MemberAddRequest, pb.MemberAddResponse, single),
    MemberRemove: messageMethod(pb.MemberRemoveRequest, pb.MemberRemoveResponse, single),
    MemberUpdate: messageMethod(pb.MemberUpdateRequest, pb.MemberUpdateResponse, single),
    MemberPromote: messageMethod(pb.MemberPromoteRequest, pb.MemberPromoteResponse, single),
  };
}

/** Streams a snapshot of the database in chunks, as fast as the client reads them, ending with its SHA-256. */
function snapshotMethod(engine: Engine, admin: (call: CallContext) => AuthInfo): Method {
  return {
    kind: 'server',
    handle(_buf, call, sink) {
      admin(call);
      const path = join(dirname(engine.backend.path), `snapshot-${randomBytes(6).toString('hex')}.tmp`);
      // A function, so the client's cancel is seen again after each await.
      const ended = (): boolean => sink.ended;
      void (async () => {
        try {
          await engine.snapshot(path);
          const file = await open(path, 'r');
          try {
            const total = (await file.stat()).size;
            const sha = createHash('sha256');
            let sent = 0;
            while (total - sent > 0 && !sink.ended) {
              const chunk = Buffer.alloc(Math.min(SNAPSHOT_CHUNK, total - sent));
              const { bytesRead } = await file.read(chunk, 0, chunk.length, sent);
              if (bytesRead === 0) break;
              sent += bytesRead;
              const blob = chunk.subarray(0, bytesRead);
              sha.update(blob);
              sink.send(snapshotChunk(total - sent, blob));
              // Read on only as fast as the client takes it, so a large file is never all in memory.
              while (sink.backlog() > SNAPSHOT_BACKLOG && !ended()) await sleep(5);
            }
            if (!sink.ended) {
              sink.send(snapshotChunk(0, sha.digest()));
              sink.end();
            }
          } finally {
            await file.close();
          }
        } catch (error) {
          const message = error instanceof Error ? error.message : String(error);
          if (!sink.ended) sink.end(new EtcdError(Code.UNKNOWN, message));
        } finally {
          await rm(path, { force: true });
        }
      })();
    },
  };
}

function snapshotChunk(remaining: number, blob: Buffer): Buffer {
  return encodeMessage(pb.SnapshotResponse, { remaining_bytes: remaining, blob });
}
