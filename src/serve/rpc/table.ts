/** Every method the server answers, by gRPC path, checked against etcd's service definitions (rpc.proto). */
import type { Engine } from '../engine.js';
import type { GroupCommit } from '../storage/group-commit.js';
import { authMethods } from './auth.js';
import { kvMethods } from './kv.js';
import { leaseMethods } from './lease.js';
import { clusterMethods, maintenanceMethods } from './maintenance.js';
import { ETCD_METHODS, type EtcdMethod } from '../proto/generated/services.js';
import type { Method, RpcSettings } from './method.js';
import { watchMethods } from './watch.js';

export interface ServedMethod {
  readonly info: EtcdMethod;
  readonly method: Method;
}

/**
 * A unary method whose answer waits until what it saw is on disk: a read may see batches committed but not
 * yet synced, and must not tell a client of a write a crash could take back. The mark is taken when the
 * call starts, so a write (answered once its own batch is synced, which covers the mark) never waits
 * longer; a read answered at once waits for at most the sync in flight and the next.
 */
function afterDurable(commit: GroupCommit, method: Method): Method {
  if (method.kind !== 'unary') return method;
  return {
    kind: 'unary',
    handle(request, call) {
      const mark = commit.mark;
      let out: Buffer | Promise<Buffer>;
      try {
        out = method.handle(request, call);
      } catch (error) {
        if (commit.isDurable(mark)) throw error;
        return commit.whenDurable(mark).then(() => Promise.reject(error as Error));
      }
      if (out instanceof Promise) {
        return out.then(
          (response) => (commit.isDurable(mark) ? response : commit.whenDurable(mark).then(() => response)),
          (error: unknown) =>
            commit.isDurable(mark)
              ? Promise.reject(error as Error)
              : commit.whenDurable(mark).then(() => Promise.reject(error as Error)),
        );
      }
      return commit.isDurable(mark) ? out : commit.whenDurable(mark).then(() => out);
    },
  };
}

export function methodTable(engine: Engine, settings: RpcSettings): Map<string, ServedMethod> {
  const infos = new Map(ETCD_METHODS.map((info) => [info.path, info]));
  const table = new Map<string, ServedMethod>();
  const add = (service: string, methods: Record<string, Method>): void => {
    for (const [name, method] of Object.entries(methods)) {
      const path = `/etcdserverpb.${service}/${name}`;
      const info = infos.get(path);
      if (info === undefined) throw new Error(`etcd's proto files define no ${path}`);
      const streaming =
        method.kind === 'bidi' ? [true, true] : method.kind === 'server' ? [false, true] : [false, false];
      if (info.requestStream !== streaming[0] || info.responseStream !== streaming[1]) {
        throw new Error(`${path} is served as ${method.kind}, which its definition is not`);
      }
      table.set(path, { info, method: afterDurable(engine.commit, method) });
    }
  };
  add('KV', kvMethods(engine, settings));
  add('Watch', watchMethods(engine, settings));
  add('Lease', leaseMethods(engine));
  add('Maintenance', maintenanceMethods(engine, settings));
  add('Cluster', clusterMethods(engine, settings));
  add('Auth', authMethods(engine));
  return table;
}
