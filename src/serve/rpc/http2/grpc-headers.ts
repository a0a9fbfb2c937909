/** The headers and trailers of gRPC responses, and grpc-go's statuses for requests no method takes. */
import type { OutgoingHttpHeaders, ServerStreamResponseOptions } from 'node:http2';
import { Code, EtcdError } from '../../errors.js';

export const RESPONSE_HEADERS: OutgoingHttpHeaders = { ':status': 200, 'content-type': 'application/grpc' };
export const OK_TRAILERS: OutgoingHttpHeaders = { 'grpc-status': '0' };

/**
 * How every gRPC response is started. node:http2 adds a `date` header to each response unless told not to
 * (`sendDate`, missing from @types/node): grpc-go sends none, and every client would decode it and carry it
 * as metadata on each call.
 */
export const RESPOND: RespondOptions = { waitForTrailers: true, sendDate: false };
/** The same for a response that ends in its one header block (trailers-only). */
export const RESPOND_ENDED: RespondOptions = { endStream: true, sendDate: false };

type RespondOptions = ServerStreamResponseOptions & { readonly sendDate: boolean };

/** gRPC's grpc-message encoding: printable ASCII except '%' as is, everything else %-escaped UTF-8. */
export function percentEncode(message: string): string {
  let out = '';
  for (const byte of Buffer.from(message, 'utf8')) {
    out +=
      byte >= 0x20 && byte <= 0x7e && byte !== 0x25
        ? String.fromCharCode(byte)
        : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

export function errorTrailers(error: EtcdError): OutgoingHttpHeaders {
  return { 'grpc-status': String(error.code), 'grpc-message': percentEncode(error.message.slice(0, 4096)) };
}

/** A trailers-only response: the status in the one header block, for an error before any message. */
export function trailersOnly(error: EtcdError): OutgoingHttpHeaders {
  return { ...RESPONSE_HEADERS, ...errorTrailers(error) };
}

/** etcd 3.4's grpc-go refuses any grpc-encoding but identity before reading the message. */
export function unsupportedEncoding(encoding: string): EtcdError {
  return new EtcdError(Code.UNIMPLEMENTED, `grpc: Decompressor is not installed for grpc-encoding "${encoding}"`);
}

/** grpc-go's answers (as etcd 3.4 gives them) for a path no method serves. */
export function unknownMethod(path: string, services: ReadonlySet<string>): EtcdError {
  const name = path.startsWith('/') ? path.slice(1) : path;
  const slash = name.lastIndexOf('/');
  // grpc-go answers a path without a service with RESOURCE_EXHAUSTED, and etcd clients see that.
  if (slash < 0) return new EtcdError(Code.RESOURCE_EXHAUSTED, `malformed method name: "${path}"`);
  const service = name.slice(0, slash);
  return new EtcdError(
    Code.UNIMPLEMENTED,
    services.has(service)
      ? `unknown method ${name.slice(slash + 1)} for service ${service}`
      : `unknown service ${service}`,
  );
}
