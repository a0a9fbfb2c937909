/** Error answers in etcd's gateway form: `{"error": text, "message": text, "code": grpc code}`. */
import { Code, EtcdError } from '../errors.js';
import type { ResponsePort } from './http.js';
import { grpcCodeName, httpStatus, statusText } from './status.js';

export function errorBody(error: EtcdError): string {
  const text = JSON.stringify(error.message);
  return `{"error":${text},"message":${text},"code":${error.code}}`;
}

/** Anything thrown by a method, as the status it answers with. */
export function asEtcdError(error: unknown): EtcdError {
  if (error instanceof EtcdError) return error;
  return new EtcdError(Code.UNKNOWN, error instanceof Error ? error.message : String(error));
}

/**
 * The answer to a request the gateway could not read or the server refused. A refusal by the server
 * carries the gRPC trailers' content type as an HTTP trailer, as etcd's does; one the gateway makes itself
 * (unreadable JSON) does not.
 */
export function sendError(res: ResponsePort, error: EtcdError, fromServer: boolean): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  res.statusCode = httpStatus(error.code);
  res.setHeader('Content-Type', 'application/json');
  if (fromServer) {
    res.setHeader('Trailer', 'Grpc-Trailer-Content-Type');
    res.addTrailers({ 'Grpc-Trailer-Content-Type': 'application/grpc' });
  }
  res.end(errorBody(error));
}

/** An error that ends a stream after it started, in grpc-gateway's stream form. */
export function streamErrorChunk(error: EtcdError): string {
  const status = httpStatus(error.code);
  const message = `rpc error: code = ${grpcCodeName(error.code)} desc = ${error.message}`;
  return JSON.stringify({
    error: { grpc_code: error.code, http_code: status, message, http_status: statusText(status) },
  });
}
