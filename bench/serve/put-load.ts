/**
 * A light gRPC load generator for the serve bench: raw HTTP/2 (node:http2),
 * one pre-encoded PutRequest per call, `inFlight` calls at a time. Run as a
 * child process (several at once, so the client side is not the limit);
 * prints one JSON line: { n, ms, p50, p99 } (latencies in ms).
 *
 *   node --import tsx bench/serve/put-load.ts HOST:PORT N IN_FLIGHT
 */
import { connect, constants } from 'node:http2';

const [endpoint = '127.0.0.1:2379', nText = '10000', inFlightText = '32'] = process.argv.slice(2);
const n = Number(nText);
const inFlight = Number(inFlightText);

/** A gRPC frame holding PutRequest { key, value }. */
function putFrame(key: string, value: Buffer): Buffer {
  const k = Buffer.from(key);
  const body = Buffer.concat([Buffer.from([0x0a, k.length]), k, Buffer.from([0x12, value.length]), value]);
  const frame = Buffer.alloc(5 + body.length);
  frame.writeUInt32BE(body.length, 1);
  body.copy(frame, 5);
  return frame;
}

const session = connect(`http://${endpoint}`);
session.on('error', (error: Error) => {
  console.error(`put-load: ${error.message}`);
  process.exit(1);
});
const value = Buffer.alloc(32, 'v');
const headers = {
  [constants.HTTP2_HEADER_METHOD]: 'POST',
  [constants.HTTP2_HEADER_PATH]: '/etcdserverpb.KV/Put',
  [constants.HTTP2_HEADER_CONTENT_TYPE]: 'application/grpc',
  te: 'trailers',
};

function put(i: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = session.request(headers);
    let status: string | undefined;
    req.on('trailers', (trailers: Record<string, string | string[] | undefined>) => {
      status = String(trailers['grpc-status']);
    });
    req.on('data', () => undefined);
    req.on('end', () => (status === '0' ? resolve() : reject(new Error(`grpc-status ${String(status)}`))));
    req.on('error', reject);
    req.end(putFrame(`h2/${process.pid}/${i}`, value));
  });
}

const latencies: number[] = [];
let next = 0;
async function lane(): Promise<void> {
  while (next < n) {
    const i = next++;
    const start = performance.now();
    await put(i);
    latencies.push(performance.now() - start);
  }
}
// Warm the connection up before timing.
for (let i = 0; i < 200; i++) await put(-i - 1);
const start = performance.now();
await Promise.all(Array.from({ length: inFlight }, lane));
const ms = performance.now() - start;
latencies.sort((a, b) => a - b);
const at = (q: number): number => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN;
process.stdout.write(`${JSON.stringify({ n, ms, p50: at(0.5), p99: at(0.99) })}\n`);
session.close();
