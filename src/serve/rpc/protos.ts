/**
 * etcd's service definitions, loaded at run time from the .proto files the
 * `etcd3` package ships (rpc.proto, kv.proto, auth.proto), so the server and
 * its clients read one definition. The hot messages (KV, Watch, Lease) have
 * their own codec in ../proto; the rest go through proto-loader's, as plain
 * objects with snake_case fields, 64-bit integers as decimal strings.
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type * as ProtoLoader from '@grpc/proto-loader';

export interface MethodInfo {
  readonly path: string;
  readonly service: string;
  readonly name: string;
  readonly requestStream: boolean;
  readonly responseStream: boolean;
  decode(buf: Buffer): Record<string, unknown>;
  encode(message: object): Buffer;
}

let cached: Map<string, MethodInfo> | null = null;

/** Every etcdserverpb method, by path (e.g. "/etcdserverpb.KV/Range"). */
export function etcdMethods(): Map<string, MethodInfo> {
  if (cached !== null) return cached;
  const require = createRequire(import.meta.url);
  const loader = require('@grpc/proto-loader') as typeof ProtoLoader;
  const dir = join(dirname(require.resolve('etcd3/package.json')), 'proto');
  const definition = loader.loadSync(join(dir, 'rpc.proto'), {
    keepCase: true,
    longs: String,
    enums: Number,
    defaults: true,
    oneofs: true,
    includeDirs: [dir],
  });
  const methods = new Map<string, MethodInfo>();
  for (const [service, value] of Object.entries(definition)) {
    if (!service.startsWith('etcdserverpb.') || 'format' in value) continue;
    for (const [name, method] of Object.entries(value)) {
      methods.set(method.path, {
        path: method.path,
        service: service.slice('etcdserverpb.'.length),
        name,
        requestStream: method.requestStream,
        responseStream: method.responseStream,
        decode: (buf) => method.requestDeserialize(buf) as Record<string, unknown>,
        encode: (message) => method.responseSerialize(message),
      });
    }
  }
  cached = methods;
  return methods;
}
