/** Answers and request bodies: small helpers every route uses. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Html } from './html.js';

/** A request the dashboard refuses with this status; the message is shown on the error page. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'HttpError';
  }
}

/** Form bodies are a few short fields: anything larger is refused before it is buffered. */
export const MAX_FORM_BYTES = 8 * 1024;

export function sendHtml(res: ServerResponse, status: number, page: Html): void {
  send(res, status, 'text/html; charset=utf-8', page.text, 'no-store');
}

export function sendJson(res: ServerResponse, value: unknown, status = 200): void {
  send(res, status, 'application/json; charset=utf-8', JSON.stringify(value), 'no-store');
}

export function send(res: ServerResponse, status: number, type: string, body: string, cache: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.statusCode = status;
  res.setHeader('Content-Type', type);
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.setHeader('Cache-Control', cache);
  res.end(body);
}

/** After a POST: the browser loads `location` with a GET (303), so a reload does not repeat the action. */
export function redirect(res: ServerResponse, location: string): void {
  res.statusCode = 303;
  res.setHeader('Location', location);
  res.setHeader('Content-Length', 0);
  res.setHeader('Cache-Control', 'no-store');
  res.end();
}

/** Reads an `application/x-www-form-urlencoded` body of at most MAX_FORM_BYTES. */
export async function readForm(req: IncomingMessage): Promise<URLSearchParams> {
  const type = (req.headers['content-type'] ?? '').split(';', 1)[0]?.trim().toLowerCase();
  if (type !== 'application/x-www-form-urlencoded') {
    req.resume();
    throw new HttpError(400, 'Actions are HTML form posts (application/x-www-form-urlencoded).');
  }
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > MAX_FORM_BYTES) {
    req.resume();
    throw new HttpError(413, `A form body is at most ${MAX_FORM_BYTES} bytes.`);
  }
  const body = await new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size <= MAX_FORM_BYTES) chunks.push(chunk);
      else {
        // Stop reading; the answer closes the connection rather than drain an endless body.
        req.off('data', onData);
        req.pause();
        reject(new HttpError(413, `A form body is at most ${MAX_FORM_BYTES} bytes.`));
      }
    };
    req.on('data', onData);
    req.once('end', () => resolve(Buffer.concat(chunks)));
    req.once('error', reject);
  });
  return new URLSearchParams(body.toString('utf8'));
}
