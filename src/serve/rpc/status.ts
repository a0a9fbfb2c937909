/**
 * Any failure of a call as the gRPC status etcd (or grpc-go before it) would answer with. A leaf module:
 * the transport and the handlers (rpc/watch.ts) both use it.
 */
import { Code, EtcdError } from '../errors.js';
import { isDecodeError } from '../proto/decode-error.js';

export function toEtcdError(error: unknown): EtcdError {
  if (error instanceof EtcdError) return error;
  if (isDecodeError(error)) {
    return new EtcdError(Code.INTERNAL, `grpc: error unmarshalling request: ${error.message}`);
  }
  const message = error instanceof Error ? error.message : String(error);
  return new EtcdError(Code.UNKNOWN, message);
}
