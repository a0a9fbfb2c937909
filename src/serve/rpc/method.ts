/**
 * What the RPC layer serves, independent of the HTTP/2 transport: each
 * method takes and returns encoded messages, so a transport only moves bytes.
 */
import type { EtcdError } from '../errors.js';

export interface CallContext {
  /** The auth token from the call's metadata ("token", or "authorization" as grpc-gateway sends it). */
  readonly token: string | undefined;
}

/** Where a streaming method writes its responses. */
export interface Sink {
  send(message: Buffer): void;
  /** Ends the call: OK without an error, else with the error's status. */
  end(error?: EtcdError): void;
  readonly ended: boolean;
  /** Bytes sent but not yet taken by the client (held back by flow control or the socket). */
  backlog(): number;
}

/** The server side of one bidirectional stream. */
export interface StreamHandler {
  message(message: Buffer): void;
  /** The client half-closed its side. */
  end(): void;
  /** The call is over (client cancelled, connection lost, or ended by the server). */
  close(): void;
}

export type Method =
  | { readonly kind: 'unary'; handle(request: Buffer, call: CallContext): Buffer | Promise<Buffer> }
  | { readonly kind: 'bidi'; open(call: CallContext, sink: Sink): StreamHandler }
  | { readonly kind: 'server'; handle(request: Buffer, call: CallContext, sink: Sink): void };

/** Settings the RPC handlers need beyond the engine. */
export interface RpcSettings {
  /** The member's name in MemberList. */
  readonly name: string;
  /** The URLs clients reach the server at, for MemberList. */
  readonly clientUrls: readonly string[];
  /** The etcd version reported by Status. */
  readonly version: string;
  /** etcd's --max-request-bytes: larger writes are refused. */
  readonly maxRequestBytes: number;
  /** Interval of watch progress notifications. */
  readonly progressIntervalMs: number;
}
