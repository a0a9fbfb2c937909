/**
 * A TCP proxy whose server-to-client direction lags by a fixed delay, in order: a client behind it sees replies
 * and watch notifications late, as over a slow link or from a ZooKeeper follower behind the leader, while
 * another client talks to the server directly. It can also be cut, as a network partition: the client loses its
 * connection and cannot make another until the link is mended. Listens on an ephemeral loopback port.
 */
import { createConnection, createServer, type Server, type Socket } from 'node:net';

export interface SlowLink {
  /** host:port to connect to instead of the server. */
  readonly address: string;
  /** Drops every connection through the link and refuses new ones until mend(). */
  cut(): void;
  mend(): void;
  close(): Promise<void>;
}

export async function slowLink(target: string, delayMs: number): Promise<SlowLink> {
  const [host = '127.0.0.1', port = ''] = target.split(':');
  const sockets = new Set<Socket>();
  let isCut = false;
  const server: Server = createServer((client) => {
    if (isCut) {
      client.destroy();
      return;
    }
    const upstream = createConnection({ host, port: Number(port) });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      // A peer gone: the other side goes too (no error is the test's business).
      s.on('error', () => undefined);
    }
    client.pipe(upstream);
    // Timers of one delay fire in the order they were set: the stream keeps its order.
    upstream.on('data', (chunk: Buffer) => setTimeout(() => client.write(chunk), delayMs));
    upstream.on('close', () => setTimeout(() => client.destroy(), delayMs));
    client.on('close', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the slow link has no TCP address');
  return {
    address: `127.0.0.1:${address.port}`,
    cut: () => {
      isCut = true;
      for (const s of sockets) s.destroy();
    },
    mend: () => {
      isCut = false;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
