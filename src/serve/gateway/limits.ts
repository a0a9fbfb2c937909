/** How much the gateway reads: a request's JSON, and the protobuf message it becomes. */
import { Code, EtcdError } from '../errors.js';
import { GRPC_OVERHEAD_BYTES } from '../rpc/watch.js';
import { errorBody } from './errors.js';
import { httpStatus } from './status.js';
import type { RequestPort, ResponsePort } from './http.js';

export interface Limits {
  /** A unary body, or one message of a stream, in JSON. */
  readonly bodyBytes: number;
  /** The encoded request, as the gRPC server bounds it. */
  readonly messageBytes: number;
}

/** JSON room for a message of `maxRequestBytes`: base64 makes bytes 4/3 as long, and field names add some. */
export function gatewayLimits(maxRequestBytes: number): Limits {
  const messageBytes = maxRequestBytes + GRPC_OVERHEAD_BYTES;
  return { messageBytes, bodyBytes: Math.ceil((messageBytes * 4) / 3) + 64 * 1024 };
}

/** How long, and how much more, a refused body is read and dropped so the client can read the answer. */
const LINGER_MS = 2000;

/**
 * Answers a body past the limit without keeping any more of it. Over HTTP/1.1 the connection closes after
 * the answer (the unread body would otherwise be taken for the next request), over HTTP/2 only the stream.
 * The answer is written whole at once but ended only after what still comes has been dropped, for a
 * bounded time and size: a socket closed with unread data is reset, which can take the answer away from
 * the client before it reads it.
 */
export function refuseTooLarge(req: RequestPort, res: ResponsePort, size: number, limit: number): void {
  const error = new EtcdError(Code.RESOURCE_EXHAUSTED, `request body is larger than ${limit} bytes (${size} or more)`);
  const body = errorBody(error);
  res.statusCode = httpStatus(error.code);
  res.setHeader('Content-Type', 'application/json');
  res.setHeader('Content-Length', Buffer.byteLength(body));
  if (!('stream' in res)) res.setHeader('Connection', 'close');
  res.write(body);
  let dropped = 0;
  const finish = (): void => {
    clearTimeout(timer);
    if (!res.writableEnded) res.end();
  };
  const timer = setTimeout(finish, LINGER_MS);
  req.on('data', (chunk) => {
    dropped += chunk.length;
    if (dropped > limit) finish();
  });
  req.on('end', finish);
  req.on('close', finish);
  req.resume();
}
