/**
 * Requests that are not gRPC (another content-type on HTTP/2, or HTTP/1.1 on the same port) go to a
 * fallback handler: etcd serves its HTTP/JSON gateway there. Without one, they get a short refusal.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';

export type FallbackHandler = (
  req: Http2ServerRequest | IncomingMessage,
  res: Http2ServerResponse | ServerResponse,
) => void;

export const refuseNonGrpc: FallbackHandler = (req, res) => {
  const post = req.method === 'POST' && req.headers['content-type'] !== undefined;
  const status = post ? 415 : 404;
  const text = post
    ? `kvmq serve: content-type ${String(req.headers['content-type'])} is not served here; use application/grpc\n`
    : "kvmq serve: no such HTTP endpoint; this port serves etcd's gRPC API\n";
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
};
