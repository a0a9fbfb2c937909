/**
 * The KV service. Checks run in etcd's order: the request's own shape first,
 * then the token, then the size limit for writes, then (when applied) the
 * permissions and the store's rules.
 */
import { checkDeleteRequest, checkPutRequest } from '../apply/kv.js';
import { checkRangeKey, checkTxnIntervals, checkTxnRequest, isTxnReadonly } from '../apply/txn.js';
import type { AuthInfo } from '../auth/store.js';
import type { Engine } from '../engine.js';
import { Errors } from '../errors.js';
import {
  decodeCompactionRequest,
  decodeDeleteRangeRequest,
  decodePutRequest,
  decodeRangeRequest,
  decodeTxnRequest,
  encodeCompactionResponse,
  encodeDeleteRangeResponse,
  encodePutResponse,
  encodeRangeResponse,
  encodeTxnResponse,
} from '../proto/kv.js';
import { varintSize } from '../proto/encode.js';
import type { CallContext, Method, RpcSettings } from './method.js';

/**
 * etcd checks the size of the raft entry a write becomes: the request plus a
 * header with a request ID and the user's name and auth revision.
 */
export function checkRequestSize(bytes: number, ai: AuthInfo, settings: RpcSettings): void {
  const header = 1 + 9 + (ai.username === '' ? 0 : 2 + ai.username.length) + (ai.revision === 0 ? 0 : 1 + 9);
  const size = 2 + varintSize(header) + header + 1 + varintSize(bytes) + bytes;
  if (size > settings.maxRequestBytes) throw Errors.requestTooLarge();
}

export function kvMethods(engine: Engine, settings: RpcSettings): Record<string, Method> {
  const h = engine.header;
  const authInfo = (call: CallContext): AuthInfo => engine.auth.authInfo(call.token);
  return {
    Range: {
      kind: 'unary',
      handle(buf, call) {
        const req = decodeRangeRequest(buf);
        checkRangeKey(req.key);
        return encodeRangeResponse(h, engine.range(req, authInfo(call)));
      },
    },
    Put: {
      kind: 'unary',
      async handle(buf, call) {
        const req = decodePutRequest(buf);
        checkPutRequest(req);
        const ai = authInfo(call);
        checkRequestSize(buf.length, ai, settings);
        return encodePutResponse(h, await engine.put(req, ai));
      },
    },
    DeleteRange: {
      kind: 'unary',
      async handle(buf, call) {
        const req = decodeDeleteRangeRequest(buf);
        checkDeleteRequest(req);
        const ai = authInfo(call);
        checkRequestSize(buf.length, ai, settings);
        return encodeDeleteRangeResponse(h, await engine.deleteRange(req, ai));
      },
    },
    Txn: {
      kind: 'unary',
      async handle(buf, call) {
        const req = decodeTxnRequest(buf);
        checkTxnRequest(req);
        checkTxnIntervals(req);
        const ai = authInfo(call);
        // A Txn that only reads is served without becoming an entry, so no size limit applies.
        if (!isTxnReadonly(req)) checkRequestSize(buf.length, ai, settings);
        return encodeTxnResponse(h, await engine.txn(req, ai));
      },
    },
    Compact: {
      kind: 'unary',
      async handle(buf, call) {
        const req = decodeCompactionRequest(buf);
        authInfo(call);
        return encodeCompactionResponse(h, await engine.compact(req));
      },
    },
  };
}
