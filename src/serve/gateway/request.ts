/** A JSON request body as the protobuf request a method takes, with etcd's gateway's errors. */
import { Code, EtcdError, messageTooLarge } from '../errors.js';
import { JsonFieldError, encodeJsonRequest } from './from-json.js';
import { JsonSyntaxError, readJsonValue, type JsonNode } from './go-json.js';
import type { Route } from './routes.js';

const EMPTY: JsonNode = { kind: 'null' };

/** The first JSON value of a unary body (an empty body is the empty request), or the error to answer. */
export function parseUnaryBody(text: string, code: number): JsonNode {
  try {
    return readJsonValue(text)?.node ?? EMPTY;
  } catch (error) {
    if (error instanceof JsonSyntaxError) throw new EtcdError(code, error.message);
    throw error;
  }
}

/**
 * `node` encoded as the route's request; a misfit is `code` (INVALID_ARGUMENT for a unary call, UNKNOWN for
 * a stream's message, as etcd answers), a message past `limit` bytes the gRPC server's refusal.
 */
export function encodeRequest(route: Route, node: JsonNode, code: number, limit: number): Buffer {
  let bytes: Buffer;
  try {
    bytes = encodeJsonRequest(node, route.request);
  } catch (error) {
    if (error instanceof JsonFieldError) throw new EtcdError(code, error.message);
    throw error;
  }
  if (bytes.length > limit) throw messageTooLarge(bytes.length, limit);
  return bytes;
}

export const UNARY_DECODE_CODE = Code.INVALID_ARGUMENT;
export const STREAM_DECODE_CODE = Code.UNKNOWN;
