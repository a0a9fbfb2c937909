/**
 * The few request and response members the gateway uses, which Node's HTTP/1.1 and HTTP/2 compatibility
 * objects share, and the headers etcd's gateway puts on every answer.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';

export type GatewayRequest = IncomingMessage | Http2ServerRequest;
export type GatewayResponse = ServerResponse | Http2ServerResponse;

/** What the gateway reads of a request. */
export interface RequestPort {
  readonly method?: string | undefined;
  readonly url?: string | undefined;
  readonly headers: Record<string, string | string[] | undefined>;
  on(event: 'data', listener: (chunk: Buffer) => void): unknown;
  on(event: 'end' | 'close', listener: () => void): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
  pause(): unknown;
  resume(): unknown;
  destroy(error?: Error): unknown;
}

/** What the gateway writes of a response. */
export interface ResponsePort {
  statusCode: number;
  readonly headersSent: boolean;
  readonly writableEnded: boolean;
  setHeader(name: string, value: string | number): unknown;
  write(chunk: string | Buffer): boolean;
  end(chunk?: string | Buffer): unknown;
  addTrailers(headers: Record<string, string>): void;
  on(event: 'drain' | 'close' | 'finish', listener: () => void): unknown;
  destroy(error?: Error): unknown;
}

/** Bytes written to the response that the client has not taken yet. */
export function unsentBytes(res: GatewayResponse): number {
  return 'stream' in res ? res.stream.writableLength : res.writableLength;
}

/** CORS as etcd serves it by default (--cors='*'). */
export function setCommonHeaders(res: ResponsePort): void {
  res.setHeader('Access-Control-Allow-Headers', 'accept, content-type, authorization');
  res.setHeader('Access-Control-Allow-Methods', 'POST, GET, OPTIONS, PUT, DELETE');
  res.setHeader('Access-Control-Allow-Origin', '*');
}

/** A plain-text answer, as Go's net/http writes its 404s and 405s. */
export function plainText(res: ResponsePort, status: number, text: string): void {
  res.statusCode = status;
  res.setHeader('Content-Type', 'text/plain; charset=utf-8');
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.end(text);
}

/** etcd's gateway passes the gRPC server's header metadata on as Grpc-Metadata-* headers. */
export function setJsonHeaders(res: ResponsePort): void {
  res.setHeader('Content-Type', 'application/json');
  res.setHeader('Grpc-Metadata-Content-Type', 'application/grpc');
}

/** The auth token: `Authorization` as it is (no "Bearer"), or gRPC metadata passed as Grpc-Metadata-Token. */
export function requestToken(req: RequestPort): string | undefined {
  const pick = (value: string | string[] | undefined): string | undefined => (Array.isArray(value) ? value[0] : value);
  return pick(req.headers.authorization) ?? pick(req.headers['grpc-metadata-token']);
}
