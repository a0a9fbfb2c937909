/**
 * etcd's HTTP/JSON gateway: the v3 API as POSTs of JSON under /v3/ (and /v3beta/), as etcd 3.4 serves it
 * beside gRPC on its client port. It calls the same methods the gRPC transport does, so auth, size limits
 * and durability are theirs.
 *
 *   const gateway = createGateway(methodTable(engine, settings), { maxRequestBytes });
 *   http.createServer(gateway);
 */
import { Code, EtcdError } from '../errors.js';
import type { ServedMethod } from '../rpc/table.js';
import { sendError } from './errors.js';
import {
  plainText,
  requestToken,
  setCommonHeaders,
  unsentBytes,
  type GatewayRequest,
  type GatewayResponse,
  type RequestPort,
  type ResponsePort,
} from './http.js';
import { gatewayLimits } from './limits.js';
import { gatewayRoutes } from './routes.js';
import { serveBidi, serveServerStream } from './stream.js';
import { serveUnary } from './unary.js';

export interface GatewayOptions {
  /** etcd's --max-request-bytes, as the server was given it. */
  readonly maxRequestBytes: number;
}

export type Gateway = (req: GatewayRequest, res: GatewayResponse) => void;

const API_PREFIX = /^\/v3(beta)?\//;

export function createGateway(table: ReadonlyMap<string, ServedMethod>, options: GatewayOptions): Gateway {
  const routes = gatewayRoutes();
  const limits = gatewayLimits(options.maxRequestBytes);
  return (request, response) => {
    const req = request as RequestPort;
    const res = response as ResponsePort;
    setCommonHeaders(res);
    const path = (req.url ?? '/').split('?', 1)[0] ?? '/';
    // Browsers ask before a cross-origin POST; etcd answers every such question yes.
    if (req.method === 'OPTIONS') {
      res.statusCode = 200;
      res.end();
      return;
    }
    const route = routes.get(path);
    if (route === undefined) {
      // Unknown API paths get the gateway's own 404, others Go's default one.
      plainText(res, 404, API_PREFIX.test(path) ? 'Not Found\n' : '404 page not found\n');
      return;
    }
    if (req.method !== 'POST') {
      plainText(res, 405, 'Method Not Allowed\n');
      return;
    }
    const served = table.get(route.grpcPath);
    const call = { token: requestToken(req) };
    const unsent = (): number => unsentBytes(response);
    if (served === undefined) {
      const [, service, name] = route.grpcPath.split('/');
      req.resume();
      sendError(
        res,
        new EtcdError(Code.UNIMPLEMENTED, `unknown method ${name ?? ''} for service ${service ?? ''}`),
        true,
      );
      return;
    }
    const method = served.method;
    const failed = (error: unknown): void => {
      if (!res.writableEnded) res.destroy(error instanceof Error ? error : new Error(String(error)));
    };
    if (method.kind === 'unary') serveUnary(route, method, call, req, res, limits).catch(failed);
    else if (method.kind === 'bidi') serveBidi(route, method, call, req, res, limits, unsent);
    else serveServerStream(route, method, call, req, res, limits, unsent).catch(failed);
  };
}
