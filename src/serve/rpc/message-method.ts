/** Unary methods written against the generated message types, for the services off the hot path. */
import type protobuf from 'protobufjs/minimal.js';
import { decodeMessage } from '../proto/decode-error.js';
import type { CallContext, Method } from './method.js';

export interface RequestType<T> {
  decode(buf: Uint8Array): T;
}

export interface ResponseType<T> {
  encode(message: T): protobuf.Writer;
}

/** A unary method: the request decoded, `handle` run, its answer encoded. */
export function messageMethod<Q, R>(
  request: RequestType<Q>,
  response: ResponseType<R>,
  handle: (req: Q, call: CallContext) => R | Promise<R>,
): Method {
  return {
    kind: 'unary',
    async handle(buf, call) {
      const answer = await handle(decodeMessage(request, buf), call);
      return response.encode(answer).finish() as Buffer;
    },
  };
}
