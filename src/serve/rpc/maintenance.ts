/** The Maintenance and Cluster services. */
import { createHash, randomBytes } from 'node:crypto';
import { open, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AuthInfo } from '../auth/store.js';
import { CORRUPT, NOSPACE, type Engine } from '../engine.js';
import { Code, EtcdError } from '../errors.js';
import { hashKv } from '../mvcc/hash.js';
import type { MethodInfo } from './protos.js';
import type { CallContext, Method, RpcSettings } from './method.js';
import { big, headerObject, num } from './objects.js';

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

/** Unary methods answered with proto-loader objects. */
function objectMethod(
  info: MethodInfo | undefined,
  handle: (req: Record<string, unknown>, call: CallContext) => object | Promise<object>,
): Method {
  if (info === undefined) throw new Error('etcd proto definition lacks a method kvmq serves');
  return {
    kind: 'unary',
    async handle(buf, call) {
      return info.encode(await handle(info.decode(buf), call));
    },
  };
}

export function maintenanceMethods(
  engine: Engine,
  settings: RpcSettings,
  methods: Map<string, MethodInfo>,
): Record<string, Method> {
  const m = (name: string): MethodInfo | undefined => methods.get(`/etcdserverpb.Maintenance/${name}`);
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
  const snapshotInfo = m('Snapshot');
  if (snapshotInfo === undefined) throw new Error('etcd proto definition lacks Maintenance/Snapshot');
  return {
    Alarm: objectMethod(m('Alarm'), async (req, call) => {
      engine.auth.authInfo(call.token);
      const alarms = await engine.alarm(num(req.action), big(req.memberID), num(req.alarm));
      // etcd's AlarmResponse carries no header.
      return { alarms: alarms.map((a) => ({ memberID: a.memberId.toString(), alarm: a.alarm })) };
    }),
    Status: objectMethod(m('Status'), () => {
      const { size, inUse } = engine.backend.sizes();
      const member = engine.identity.memberId;
      return {
        header: headerObject(engine),
        version: settings.version,
        dbSize: String(size),
        leader: member.toString(),
        raftIndex: String(engine.appliedIndex),
        raftTerm: String(engine.identity.raftTerm),
        raftAppliedIndex: String(engine.appliedIndex),
        errors: engine
          .alarmList()
          .map((a) => `memberID:${a.memberId.toString()} alarm:${ALARM_NAMES[a.alarm] ?? String(a.alarm)} `),
        dbSizeInUse: String(inUse),
        isLearner: false,
      };
    }),
    Defragment: objectMethod(m('Defragment'), async (_req, call) => {
      admin(call);
      await engine.defragment();
      // etcd's DefragmentResponse carries no header.
      return {};
    }),
    Hash: objectMethod(m('Hash'), (_req, call) => {
      admin(call);
      const hash = hashKv(engine.backend.db, engine.currentRev, -1);
      return { header: headerObject(engine), hash };
    }),
    HashKV: objectMethod(m('HashKV'), (req, call) => {
      admin(call);
      const result = engine.hashKv(num(req.revision));
      return {
        header: headerObject(engine, result.rev),
        hash: result.hash,
        compact_revision: String(result.compactRev),
      };
    }),
    MoveLeader: objectMethod(m('MoveLeader'), (req, call) => {
      admin(call);
      if (big(req.targetID) !== engine.identity.memberId) {
        throw new EtcdError(Code.FAILED_PRECONDITION, 'etcdserver: bad leader transferee');
      }
      return {};
    }),
    Snapshot: {
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
                sink.send(snapshotInfo.encode({ remaining_bytes: String(total - sent), blob }));
                // Read on only as fast as the client takes it, so a large file is never all in memory.
                while (sink.backlog() > SNAPSHOT_BACKLOG && !ended()) await sleep(5);
              }
              if (!sink.ended) {
                sink.send(snapshotInfo.encode({ remaining_bytes: '0', blob: sha.digest() }));
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
    },
  };
}

export function clusterMethods(
  engine: Engine,
  settings: RpcSettings,
  methods: Map<string, MethodInfo>,
): Record<string, Method> {
  const m = (name: string): MethodInfo | undefined => methods.get(`/etcdserverpb.Cluster/${name}`);
  const single = (): never => {
    throw new EtcdError(Code.UNIMPLEMENTED, 'kvmq serve runs as a single member and cannot change membership');
  };
  return {
    MemberList: objectMethod(m('MemberList'), () => ({
      // etcd's cluster responses carry no revision.
      header: headerObject(engine, 0),
      members: [
        {
          ID: engine.identity.memberId.toString(),
          name: settings.name,
          peerURLs: [],
          clientURLs: [...settings.clientUrls],
          isLearner: false,
        },
      ],
    })),
    MemberAdd: objectMethod(m('MemberAdd'), single),
    MemberRemove: objectMethod(m('MemberRemove'), single),
    MemberUpdate: objectMethod(m('MemberUpdate'), single),
    MemberPromote: objectMethod(m('MemberPromote'), single),
  };
}
