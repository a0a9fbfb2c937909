/** The Lease service. */
import type { Engine } from '../engine.js';
import { EtcdError } from '../errors.js';
import {
  decodeLeaseGrantRequest,
  decodeLeaseKeepAliveRequest,
  decodeLeaseRevokeRequest,
  decodeTimeToLiveRequest,
  encodeLeaseGrantResponse,
  encodeLeaseKeepAliveResponse,
  encodeLeaseLeasesResponse,
  encodeLeaseRevokeResponse,
  encodeTimeToLiveResponse,
} from '../proto/lease.js';
import { keyBytes } from '../bytes.js';
import type { Method } from './method.js';

export function leaseMethods(engine: Engine): Record<string, Method> {
  const h = engine.header;
  return {
    LeaseGrant: {
      kind: 'unary',
      async handle(buf, call) {
        const req = decodeLeaseGrantRequest(buf);
        engine.auth.authInfo(call.token);
        const lease = await engine.leaseGrant(req.ttl, req.id);
        return encodeLeaseGrantResponse(h, engine.durableRev, lease.id, lease.ttl);
      },
    },
    LeaseRevoke: {
      kind: 'unary',
      async handle(buf, call) {
        const id = decodeLeaseRevokeRequest(buf);
        const ai = engine.auth.authInfo(call.token);
        return encodeLeaseRevokeResponse(h, await engine.leaseRevoke(id, ai));
      },
    },
    LeaseKeepAlive: {
      kind: 'bidi',
      open(_call, sink) {
        // Renewals are answered in the order they came, one at a time, as etcd's loop does.
        let chain = Promise.resolve();
        const state = { closed: false };
        // A function, so the check is made again after each await.
        const open = (): boolean => !state.closed;
        return {
          message(buf) {
            const id = decodeLeaseKeepAliveRequest(buf);
            chain = chain.then(async () => {
              if (state.closed) return;
              const revision = engine.currentRev;
              try {
                const ttl = await engine.leaseRenew(id);
                if (open()) sink.send(encodeLeaseKeepAliveResponse(h, revision, id, ttl));
              } catch (error) {
                if (open()) sink.end(error instanceof EtcdError ? error : undefined);
                state.closed = true;
              }
            });
          },
          end() {
            void chain.then(() => {
              if (!state.closed) sink.end();
              state.closed = true;
            });
          },
          close() {
            state.closed = true;
          },
        };
      },
    },
    LeaseTimeToLive: {
      kind: 'unary',
      handle(buf) {
        const req = decodeTimeToLiveRequest(buf);
        const lease = engine.lessor.lookup(req.id);
        const revision = engine.currentRev;
        if (lease === undefined) {
          return encodeTimeToLiveResponse(h, revision, { id: req.id, ttl: -1, grantedTtl: 0, keys: null });
        }
        // etcd truncates the seconds left toward zero.
        const ttl = Math.trunc(lease.remainingMs(engine.now()) / 1000);
        const keys = req.keys ? [...lease.keys].sort().map(keyBytes) : null;
        return encodeTimeToLiveResponse(h, revision, { id: req.id, ttl, grantedTtl: lease.ttl, keys });
      },
    },
    LeaseLeases: {
      kind: 'unary',
      handle() {
        const ids = engine.lessor.list().map((lease) => lease.id);
        return encodeLeaseLeasesResponse(h, engine.currentRev, ids);
      },
    },
  };
}
