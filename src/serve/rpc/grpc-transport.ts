/**
 * Serves the method table over gRPC with @grpc/grpc-js. grpc-js only moves
 * bytes here: each method decodes its request and encodes its response
 * itself, so errors map to etcd's statuses in one place.
 */
import { createRequire } from 'node:module';
import type * as Grpc from '@grpc/grpc-js';
import { Code, EtcdError, messageTooLarge } from '../errors.js';
import { WireError } from '../proto/wire.js';
import type { CallContext, Sink, StreamHandler } from './method.js';
import type { ServedMethod } from './table.js';

export interface Transport {
  readonly port: number;
  close(): Promise<void>;
}

/** Messages above this never reach a handler (grpc-js drops them); between `limit` and this, etcd's error. */
const HARD_RECEIVE_LIMIT = 64 * 1024 * 1024;

function identity(buf: Buffer): Buffer {
  return buf;
}

/** Any failure as the status etcd (or grpc-go before it) would answer with. */
export function toEtcdError(error: unknown): EtcdError {
  if (error instanceof EtcdError) return error;
  if (
    error instanceof WireError ||
    (error instanceof Error && /index out of range|invalid wire type/.test(error.message))
  ) {
    return new EtcdError(Code.INTERNAL, `grpc: error unmarshalling request: ${error.message}`);
  }
  const message = error instanceof Error ? error.message : String(error);
  return new EtcdError(Code.UNKNOWN, message);
}

function status(error: unknown): Partial<Grpc.StatusObject> {
  const e = toEtcdError(error);
  // EtcdError codes are gRPC status numbers by construction.
  // eslint-disable-next-line @typescript-eslint/no-unsafe-enum-assignment
  return { code: e.code, details: e.message };
}

function callContext(metadata: Grpc.Metadata): CallContext {
  const token = metadata.get('token')[0] ?? metadata.get('authorization')[0];
  return { token: typeof token === 'string' ? token : token?.toString() };
}

export async function listenGrpc(
  table: Map<string, ServedMethod>,
  host: string,
  port: number,
  receiveLimit: number,
): Promise<Transport> {
  const grpc = createRequire(import.meta.url)('@grpc/grpc-js') as typeof Grpc;
  const server = new grpc.Server({
    'grpc.max_receive_message_length': HARD_RECEIVE_LIMIT,
    'grpc.max_send_message_length': -1,
  });
  const services = new Map<
    string,
    { definition: Grpc.ServiceDefinition; implementation: Grpc.UntypedServiceImplementation }
  >();
  const tooLarge = (buf: Buffer): EtcdError | null =>
    buf.length > receiveLimit ? messageTooLarge(buf.length, receiveLimit) : null;

  for (const [path, { info, method }] of table) {
    let service = services.get(info.service);
    if (service === undefined) {
      service = { definition: {}, implementation: {} };
      services.set(info.service, service);
    }
    (service.definition as Record<string, Grpc.MethodDefinition<Buffer, Buffer>>)[info.name] = {
      path,
      requestStream: info.requestStream,
      responseStream: info.responseStream,
      requestSerialize: identity,
      requestDeserialize: identity,
      responseSerialize: identity,
      responseDeserialize: identity,
    };
    if (method.kind === 'unary') {
      service.implementation[info.name] = (
        call: Grpc.ServerUnaryCall<Buffer, Buffer>,
        callback: Grpc.sendUnaryData<Buffer>,
      ): void => {
        const oversized = tooLarge(call.request);
        if (oversized !== null) {
          callback(status(oversized));
          return;
        }
        let result: Buffer | Promise<Buffer>;
        try {
          result = method.handle(call.request, callContext(call.metadata));
        } catch (error) {
          callback(status(error));
          return;
        }
        if (Buffer.isBuffer(result)) callback(null, result);
        else
          result.then(
            (buf) => callback(null, buf),
            (error: unknown) => callback(status(error)),
          );
      };
    } else if (method.kind === 'server') {
      service.implementation[info.name] = (call: Grpc.ServerWritableStream<Buffer, Buffer>): void => {
        const sink = sinkFor(call);
        try {
          method.handle(call.request, callContext(call.metadata), sink);
        } catch (error) {
          sink.end(toEtcdError(error));
        }
      };
    } else {
      service.implementation[info.name] = (call: Grpc.ServerDuplexStream<Buffer, Buffer>): void => {
        const sink = sinkFor(call);
        let handler: StreamHandler;
        try {
          handler = method.open(callContext(call.metadata), sink);
        } catch (error) {
          sink.end(toEtcdError(error));
          return;
        }
        call.on('data', (buf: Buffer) => {
          if (sink.ended) return;
          const oversized = tooLarge(buf);
          if (oversized !== null) {
            sink.end(oversized);
            return;
          }
          try {
            handler.message(buf);
          } catch (error) {
            sink.end(toEtcdError(error));
          }
        });
        call.on('end', () => handler.end());
        call.on('cancelled', () => handler.close());
        call.on('close', () => handler.close());
        call.on('error', () => handler.close());
      };
    }
  }
  for (const { definition, implementation } of services.values()) server.addService(definition, implementation);

  const bound = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${host}:${port}`, grpc.ServerCredentials.createInsecure(), (error, actual) => {
      if (error) reject(error);
      else resolve(actual);
    });
  });
  return {
    port: bound,
    close: () =>
      new Promise<void>((resolve) => {
        // Watch and keep-alive streams never end on their own: cut them after a grace period.
        const timer = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 1000);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      }),
  };
}

function sinkFor(call: Grpc.ServerWritableStream<Buffer, Buffer> | Grpc.ServerDuplexStream<Buffer, Buffer>): Sink {
  let ended = false;
  return {
    send(message) {
      if (!ended) call.write(message);
    },
    end(error) {
      if (ended) return;
      ended = true;
      if (error === undefined) call.end();
      else call.emit('error', { code: error.code, details: error.message });
    },
    get ended() {
      return ended || call.cancelled;
    },
    // grpc-js keeps its own buffer in messages, not bytes: this transport does not pause slow watchers.
    backlog: () => 0,
  };
}
