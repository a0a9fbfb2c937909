/** The gateway's routes: each HTTP path etcd 3.4 serves, and the gRPC method behind it. */
import type protobuf from 'protobufjs';
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

interface HttpRule {
  readonly post?: string;
  readonly additional_bindings?: HttpRule | readonly HttpRule[];
}

function posts(rule: HttpRule): string[] {
  const more = rule.additional_bindings;
  const nested = more === undefined ? [] : Array.isArray(more) ? more : [more as HttpRule];
  return [...(rule.post === undefined ? [] : [rule.post]), ...nested.flatMap(posts)];
}

let cached: Map<string, Route> | null = null;

/** Every route by HTTP path, prefixes included. */
export function gatewayRoutes(): Map<string, Route> {
  if (cached !== null) return cached;
  const routes = new Map<string, Route>();
  const visit = (namespace: protobuf.NamespaceBase): void => {
    for (const nested of namespace.nestedArray) {
      if ('methods' in nested && nested.fullName.startsWith('.etcdserverpb.')) {
        const service = nested as protobuf.Service;
        for (const method of service.methodsArray) {
          const grpcPath = `/etcdserverpb.${service.name}/${method.name}`;
          if (NOT_IN_ETCD_34.has(grpcPath) || SHADOWED.has(grpcPath)) continue;
          const rules = (method.parsedOptions ?? []) as Record<string, HttpRule>[];
          for (const rule of rules.flatMap((option) => option['(google.api.http)'] ?? [])) {
            for (const post of posts(rule)) {
              const route = {
                grpcPath,
                request: method.resolvedRequestType as protobuf.Type,
                response: method.resolvedResponseType as protobuf.Type,
              };
              for (const prefix of PREFIXES) routes.set(prefix + post.slice('/v3/'.length), route);
            }
          }
        }
      } else if ('nestedArray' in nested) {
        visit(nested as protobuf.NamespaceBase);
      }
    }
  };
  visit(etcdSchema());
  cached = routes;
  return routes;
}
