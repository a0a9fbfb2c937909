/** The Watch service: one WatchStream per call. */
import type { Engine } from '../engine.js';
import { decodeWatchRequest } from '../proto/watch.js';
import { toEtcdError } from './status.js';
import { WatchStream } from '../watch/stream.js';
import type { Method, RpcSettings } from './method.js';

/** etcd's allowance above --max-request-bytes for gRPC framing, which also bounds a watch response. */
export const GRPC_OVERHEAD_BYTES = 512 * 1024;

export function watchMethods(engine: Engine, settings: RpcSettings): Record<string, Method> {
  return {
    Watch: {
      kind: 'bidi',
      open(call, sink) {
        const stream = new WatchStream(
          {
            hub: engine.hub,
            kv: engine.kv,
            auth: engine.auth,
            header: engine.header,
            progressIntervalMs: settings.progressIntervalMs,
            maxResponseBytes: settings.maxRequestBytes + GRPC_OVERHEAD_BYTES,
          },
          call.token,
          (message) => {
            if (!sink.ended) sink.send(message);
          },
          () => sink.backlog(),
        );
        // A request is taken only against what is on disk (its permission check reads auth state): while a
        // sync is in flight it waits for it, and the requests after it wait behind it, in order.
        let waiting: Promise<void> | null = null;
        const take = (message: Buffer): void => {
          // A malformed request fails the stream now.
          const req = decodeWatchRequest(message);
          const commit = engine.commit;
          if (waiting === null && commit.isDurable(commit.mark)) {
            stream.onRequest(req);
            return;
          }
          const mark = commit.mark;
          const queued: Promise<void> = (waiting ?? Promise.resolve())
            .then(() => commit.whenDurable(mark))
            .then(() => stream.onRequest(req))
            .catch((error: unknown) => {
              if (!sink.ended) sink.end(toEtcdError(error));
            })
            .finally(() => {
              if (waiting === queued) waiting = null;
            });
          waiting = queued;
        };
        return {
          message: take,
          // etcd keeps a watch stream open after the client half-closes it.
          end: () => undefined,
          close: () => stream.close(),
        };
      },
    },
  };
}
