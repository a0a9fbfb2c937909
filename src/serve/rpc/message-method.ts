/** Unary methods written against the generated message types, for the services off the hot path. */
import { decodeMessage } from '../proto/decode-error.js';
import { encodeMessage, type Encoder } from '../proto/encode.js';
import type { CallContext, Method } from './method.js';

export interface RequestType<T> {
  decode(buf: Uint8Array): T;
}

/** A unary method: the request decoded, `handle` run, its answer encoded. */
export function messageMethod<Q, R>(
  request: RequestType<Q>,
  response: Encoder<R>,
  handle: (req: Q, call: CallContext) => R | Promise<R>,
): Method {
  return {
    kind: 'unary',
    async handle(buf, call) {
      return encodeMessage(response, await handle(decodeMessage(request, buf), call));
    },
  };
}
