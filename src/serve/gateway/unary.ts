/** A unary call: one JSON request body, one JSON answer. */
import type { CallContext, Method } from '../rpc/method.js';
import { readBody } from './body.js';
import { asEtcdError, sendError } from './errors.js';
import { setJsonHeaders, type RequestPort, type ResponsePort } from './http.js';
import { refuseTooLarge, type Limits } from './limits.js';
import { UNARY_DECODE_CODE, encodeRequest, parseUnaryBody } from './request.js';
import type { Route } from './routes.js';
import { decodeToJson } from './to-json.js';

/**
 * The request of a call with one request message, from the whole body; null when there is none to make
 * (the client went away, or the refusal has been answered).
 */
export async function readRequest(
  route: Route,
  req: RequestPort,
  res: ResponsePort,
  limits: Limits,
): Promise<Buffer | null> {
  const body = await readBody(req, limits.bodyBytes);
  if ('aborted' in body) return null;
  if ('tooLarge' in body) {
    refuseTooLarge(req, res, body.tooLarge, limits.bodyBytes);
    return null;
  }
  try {
    const node = parseUnaryBody(body.text, UNARY_DECODE_CODE);
    return encodeRequest(route, node, UNARY_DECODE_CODE, limits.messageBytes);
  } catch (error) {
    sendError(res, asEtcdError(error), false);
    return null;
  }
}

export async function serveUnary(
  route: Route,
  method: Extract<Method, { kind: 'unary' }>,
  call: CallContext,
  req: RequestPort,
  res: ResponsePort,
  limits: Limits,
): Promise<void> {
  const request = await readRequest(route, req, res, limits);
  if (request === null) return;
  let json: string;
  try {
    json = decodeToJson(await method.handle(request, call), route.response);
  } catch (error) {
    sendError(res, asEtcdError(error), true);
    return;
  }
  if (res.writableEnded) return;
  res.statusCode = 200;
  setJsonHeaders(res);
  res.setHeader('Content-Length', Buffer.byteLength(json));
  res.end(json);
}
