/**
 * Range throughput measured with h2load (Debian's nghttp2-client), a C HTTP/2 load generator, so the
 * client is far lighter than either server: every request is the same pre-encoded gRPC RangeRequest.
 * h2load counts an HTTP 200 as a success, and a gRPC error is an HTTP 200 too, so the request is first
 * sent once with node:http2 and its grpc-status checked.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { connect, constants } from 'node:http2';
import { join } from 'node:path';

export const H2LOAD_PACKAGES = ['nghttp2-client'];

/** A gRPC frame holding RangeRequest { key }. */
export function rangeFrame(key: string): Buffer {
  const k = Buffer.from(key);
  const body = Buffer.concat([Buffer.from([0x0a, k.length]), k]);
  const frame = Buffer.alloc(5 + body.length);
  frame.writeUInt32BE(body.length, 1);
  body.copy(frame, 5);
  return frame;
}

const RANGE_PATH = '/etcdserverpb.KV/Range';

/** Sends the request once and resolves with its grpc-status. */
function grpcStatus(endpoint: string, frame: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const session = connect(`http://${endpoint}`);
    session.on('error', reject);
    const req = session.request({
      [constants.HTTP2_HEADER_METHOD]: 'POST',
      [constants.HTTP2_HEADER_PATH]: RANGE_PATH,
      [constants.HTTP2_HEADER_CONTENT_TYPE]: 'application/grpc',
      te: 'trailers',
    });
    let status = 'none';
    req.on(
      'trailers',
      (trailers: Record<string, string | string[] | undefined>) => (status = String(trailers['grpc-status'])),
    );
    req.on('response', (headers) => {
      // A trailers-only answer carries grpc-status in the headers.
      if (headers['grpc-status'] !== undefined) status = String(headers['grpc-status']);
    });
    req.on('data', () => undefined);
    req.on('end', () => {
      session.close();
      resolve(status);
    });
    req.on('error', reject);
    req.end(frame);
  });
}

export interface H2loadFigures {
  readonly perSec: number;
  readonly ms: number;
}

/** n ranges of `key` over `clients` connections with `streams` requests in flight on each. */
export async function h2loadRanges(
  endpoint: string,
  dir: string,
  key: string,
  n: number,
  clients: number,
  streams: number,
): Promise<H2loadFigures> {
  const frame = rangeFrame(key);
  const status = await grpcStatus(endpoint, frame);
  if (status !== '0') throw new Error(`a Range on ${endpoint} answered grpc-status ${status}`);
  const body = join(dir, 'range.bin');
  writeFileSync(body, frame);
  // prettier-ignore
  const args = ['-n', String(n), '-c', String(clients), '-m', String(streams), '-d', body,
    '-H', 'content-type: application/grpc', '-H', 'te: trailers', `http://${endpoint}${RANGE_PATH}`];
  const output = await new Promise<string>((resolve, reject) => {
    const child = spawn('h2load', args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`h2load exited with ${code}`))));
  });
  const succeeded = /(\d+) succeeded/.exec(output)?.[1];
  const finished = /finished in ([\d.]+)(ms|s),/.exec(output);
  if (Number(succeeded) !== n || finished === null) throw new Error(`h2load: not every range succeeded:\n${output}`);
  const ms = Number(finished[1]) * (finished[2] === 's' ? 1000 : 1);
  return { perSec: (n * 1000) / ms, ms };
}
