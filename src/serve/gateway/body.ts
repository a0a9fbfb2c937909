/**
 * Request bodies, bounded: a unary body is read whole up to a limit and refused past it without reading
 * more; a stream's body is cut into JSON values one at a time, each bounded alike.
 */
import { StringDecoder } from 'node:string_decoder';
import { JsonSyntaxError, readJsonValue, type JsonNode } from './go-json.js';
import type { RequestPort } from './http.js';

export type BodyResult = { readonly text: string } | { readonly tooLarge: number } | { readonly aborted: true };

/** The whole body as text, or how many bytes it has (at least) when that is over `limit`. */
export function readBody(req: RequestPort, limit: number): Promise<BodyResult> {
  const declared = Number(req.headers['content-length'] ?? NaN);
  if (declared > limit) return Promise.resolve({ tooLarge: declared });
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    let done = false;
    const finish = (result: BodyResult): void => {
      if (done) return;
      done = true;
      resolve(result);
    };
    req.on('data', (chunk) => {
      if (done) return;
      bytes += chunk.length;
      if (bytes > limit) {
        req.pause();
        finish({ tooLarge: bytes });
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => finish({ text: Buffer.concat(chunks, bytes).toString('utf8') }));
    req.on('error', () => finish({ aborted: true }));
    req.on('close', () => finish({ aborted: true }));
  });
}

/** A stream's message past the limit: the call ends, as gRPC ends a call whose message is too large. */
export class StreamMessageTooLarge extends Error {
  constructor(limit: number) {
    super(`a stream message is larger than ${limit} bytes`);
    this.name = 'StreamMessageTooLarge';
  }
}

export interface StreamMessages {
  /** A whole JSON value arrived. */
  message(node: JsonNode): void;
  /** The body ended (with nothing left but whitespace). */
  end(): void;
  /** Malformed JSON, or a value past the limit: nothing more is read. */
  fail(error: Error): void;
}

/** Cuts a request stream's body into JSON values as Go's json.Decoder does, each at most `limit` bytes. */
export function readJsonStream(req: RequestPort, limit: number, to: StreamMessages): void {
  const decoder = new StringDecoder('utf8');
  let pending = '';
  let stopped = false;
  const stop = (error: Error): void => {
    stopped = true;
    pending = '';
    req.pause();
    to.fail(error);
  };
  const drain = (ended: boolean): void => {
    while (!stopped) {
      let read: ReturnType<typeof readJsonValue>;
      try {
        read = readJsonValue(pending);
      } catch (error) {
        if (!(error instanceof JsonSyntaxError)) throw error;
        if (error.eof && !ended) {
          if (Buffer.byteLength(pending) > limit) stop(new StreamMessageTooLarge(limit));
          return;
        }
        stop(error);
        return;
      }
      if (read === null) {
        pending = '';
        if (ended) {
          stopped = true;
          to.end();
        }
        return;
      }
      if (read.end > limit) {
        stop(new StreamMessageTooLarge(limit));
        return;
      }
      pending = pending.slice(read.end);
      to.message(read.node);
    }
  };
  req.on('data', (chunk) => {
    if (stopped) return;
    pending += decoder.write(chunk);
    drain(false);
  });
  req.on('end', () => {
    if (stopped) return;
    pending += decoder.end();
    drain(true);
  });
}
