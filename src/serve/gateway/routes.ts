/** The gateway's routes: each HTTP path etcd 3.4 serves, and the gRPC method behind it. */
import type protobuf from 'protobufjs/light.js';
import { ETCD_METHODS } from '../proto/generated/services.js';
import { etcdSchema } from './schema.js';

export interface Route {
  /** "/etcdserverpb.KV/Range", the key of the method table. */
  readonly grpcPath: string;
  readonly request: protobuf.Type;
  readonly response: protobuf.Type;
}

/** etcd 3.4 answers both; /v3alpha/ went with 3.4 (a 404 there). */
const PREFIXES = ['/v3/', '/v3beta/'];

/**
 * Bindings the vendored definitions have that etcd 3.4's gateway does not serve: those methods came later,
 * and AuthStatus and Downgrade answer 404 there. HashKV shares /v3/maintenance/hash with Hash, and etcd
 * 3.4 routes that path to Hash.
 */
const NOT_IN_ETCD_34 = new Set(['/etcdserverpb.Auth/AuthStatus', '/etcdserverpb.Maintenance/Downgrade']);
const SHADOWED = new Set(['/etcdserverpb.Maintenance/HashKV']);

let cached: Map<string, Route> | null = null;

/** Every route by HTTP path, prefixes included. */
export function gatewayRoutes(): Map<string, Route> {
  if (cached !== null) return cached;
  const schema = etcdSchema();
  const routes = new Map<string, Route>();
  for (const method of ETCD_METHODS) {
    if (NOT_IN_ETCD_34.has(method.path) || SHADOWED.has(method.path)) continue;
    const route = {
      grpcPath: method.path,
      request: schema.lookupType(method.requestType),
      response: schema.lookupType(method.responseType),
    };
    for (const post of method.httpPosts) {
      for (const prefix of PREFIXES) routes.set(prefix + post.slice('/v3/'.length), route);
    }
  }
  cached = routes;
  return routes;
}
