/**
 * The most any server on node:http2 can answer on this machine: every gRPC call gets the same fixed,
 * empty response and OK trailers, with no work behind it. The serve bench loads it with h2load beside
 * etcd and kvmq serve, to show how much of kvmq serve's range rate the transport itself leaves.
 * Prints {"endpoint": "HOST:PORT"} once listening.
 *
 *   node --import tsx bench/serve/h2-ceiling.ts
 */
import { createServer } from 'node:http2';

const EMPTY_MESSAGE = Buffer.from([0, 0, 0, 0, 0]);

const server = createServer({ settings: { maxConcurrentStreams: 1000 } });
server.on('stream', (stream) => {
  stream.on('data', () => undefined);
  stream.on('end', () => {
    stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
    stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
    stream.end(EMPTY_MESSAGE);
  });
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  process.stdout.write(`${JSON.stringify({ endpoint: `127.0.0.1:${port}` })}\n`);
});
