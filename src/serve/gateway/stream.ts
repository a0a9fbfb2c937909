/**
 * Streaming calls over HTTP: a request stream is a body of JSON values one after another, the response one
 * `{"result": ...}` line per message, written as each is sent (etcd's gateway framing).
 */
import { Code, EtcdError } from '../errors.js';
import type { CallContext, Method, Sink } from '../rpc/method.js';
import { StreamMessageTooLarge, readJsonStream } from './body.js';
import { asEtcdError, sendError, streamErrorChunk } from './errors.js';
import { setJsonHeaders, type RequestPort, type ResponsePort } from './http.js';
import { httpStatus } from './status.js';
import type { Limits } from './limits.js';
import { STREAM_DECODE_CODE, encodeRequest } from './request.js';
import type { Route } from './routes.js';
import { decodeToJson } from './to-json.js';
import { readRequest } from './unary.js';

/** Writes a call's messages to the response; `unsent` is what the client has not read yet. */
class ResponseSink implements Sink {
  private done = false;

  constructor(
    private readonly route: Route,
    private readonly res: ResponsePort,
    private readonly unsent: () => number,
    private readonly onFull: () => void,
  ) {
    res.on('close', () => {
      this.done = true;
    });
  }

  get ended(): boolean {
    return this.done || this.res.writableEnded;
  }

  send(message: Buffer): void {
    if (this.ended) return;
    if (!this.res.headersSent) {
      this.res.statusCode = 200;
      setJsonHeaders(this.res);
    }
    const line = `{"result":${decodeToJson(message, this.route.response)}}\n`;
    if (!this.res.write(line)) this.onFull();
  }

  end(error?: EtcdError): void {
    if (this.ended) return;
    this.done = true;
    if (error === undefined) {
      this.res.end();
      return;
    }
    if (!this.res.headersSent) {
      this.res.statusCode = httpStatus(error.code);
      this.res.setHeader('Content-Type', 'application/json');
    }
    this.res.end(streamErrorChunk(error));
  }

  backlog(): number {
    return this.unsent();
  }
}

export function serveBidi(
  route: Route,
  method: Extract<Method, { kind: 'bidi' }>,
  call: CallContext,
  req: RequestPort,
  res: ResponsePort,
  limits: Limits,
  unsent: () => number,
): void {
  // A client that does not read its answers stops being read from, so its requests cannot pile answers up.
  let full = false;
  res.on('drain', () => {
    if (full) req.resume();
    full = false;
  });
  const sink = new ResponseSink(route, res, unsent, () => {
    full = true;
    req.pause();
  });
  const handler = method.open(call, sink);
  let first = true;
  let closed = false;
  // Set once the client's side is over (its body ended, or held a value etcd could not decode).
  let halfClosed = false;
  const halfClose = (): void => {
    if (closed || halfClosed) return;
    halfClosed = true;
    handler.end();
  };
  const close = (): void => {
    if (closed) return;
    closed = true;
    handler.close();
  };
  res.on('close', close);
  const fail = (error: unknown): void => {
    close();
    sink.end(asEtcdError(error));
  };
  readJsonStream(req, limits.bodyBytes, {
    message(node) {
      if (closed || halfClosed || sink.ended) return;
      let request: Buffer;
      try {
        request = encodeRequest(route, node, STREAM_DECODE_CODE, limits.messageBytes);
      } catch (error) {
        const refusal = asEtcdError(error);
        if (refusal.code === Code.RESOURCE_EXHAUSTED) fail(refusal);
        else if (first) {
          // The first message is read before the call's answer starts, so its error is the whole answer.
          close();
          sendError(res, refusal, false);
        } else halfClose();
        return;
      }
      first = false;
      try {
        handler.message(request);
      } catch (error) {
        fail(error);
      }
    },
    end: halfClose,
    fail(error) {
      if (closed) return;
      if (error instanceof StreamMessageTooLarge) fail(new EtcdError(Code.RESOURCE_EXHAUSTED, error.message));
      else if (first) {
        close();
        sendError(res, new EtcdError(STREAM_DECODE_CODE, error.message), false);
      } else {
        // etcd stops reading a stream at a value it cannot decode, as if the client had half-closed it.
        halfClose();
      }
    },
  });
}

export async function serveServerStream(
  route: Route,
  method: Extract<Method, { kind: 'server' }>,
  call: CallContext,
  req: RequestPort,
  res: ResponsePort,
  limits: Limits,
  unsent: () => number,
): Promise<void> {
  const request = await readRequest(route, req, res, limits);
  if (request === null) return;
  const sink = new ResponseSink(route, res, unsent, () => undefined);
  try {
    method.handle(request, call, sink);
  } catch (error) {
    sink.end(asEtcdError(error));
  }
}
