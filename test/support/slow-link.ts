/**
 * A TCP proxy whose server-to-client direction lags by a fixed delay, in order: a client behind it sees replies
 * and watch notifications late, as over a slow link or from a ZooKeeper follower behind the leader, while
 * another client talks to the server directly. It can also be cut, as a network partition: the client loses its
 * connection and cannot make another until the link is mended. Or it can be blackholed: the connections stay
 * open and new ones are taken, but nothing crosses in either direction until the link is mended, when what was
 * held back goes on in order (a renewal then answered late). Listens on an ephemeral loopback port.
 */
import { createConnection, createServer, type Server, type Socket } from 'node:net';

export interface SlowLink {
  /** host:port to connect to instead of the server. */
  readonly address: string;
  /** How many connections clients have opened through the link so far. */
  readonly opened: number;
  /** Drops every connection through the link and refuses new ones until mend(). */
  cut(): void;
  /** Forwards nothing either way, dropping no connection, until mend(). */
  blackhole(): void;
  mend(): void;
  close(): Promise<void>;
}

export async function slowLink(target: string, delayMs: number): Promise<SlowLink> {
  const [host = '127.0.0.1', port = ''] = target.split(':');
  const sockets = new Set<Socket>();
  let isCut = false;
  let opened = 0;
  // While blackholed: what each connection would have sent, in order, and connections not yet made upstream.
  let held: (() => void)[] | null = null;
  const later = (send: () => void): void => {
    if (held === null) send();
    else held.push(send);
  };
  const server: Server = createServer((client) => {
    if (isCut) {
      client.destroy();
      return;
    }
    opened += 1;
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => undefined);
    // The client's bytes wait until the upstream connection is made (a blackholed link makes it later).
    const early: Buffer[] = [];
    let upstream: Socket | null = null;
    client.on('data', (chunk: Buffer) => {
      if (upstream === null) early.push(chunk);
      else later(() => upstream?.write(chunk));
    });
    client.on('close', () => upstream?.destroy());
    later(() => {
      if (client.destroyed) return;
      const up = createConnection({ host, port: Number(port) });
      upstream = up;
      sockets.add(up);
      up.on('close', () => sockets.delete(up));
      // A peer gone: the other side goes too (no error is the test's business).
      up.on('error', () => undefined);
      for (const chunk of early.splice(0)) up.write(chunk);
      // Timers of one delay fire in the order they were set: the stream keeps its order.
      up.on('data', (chunk: Buffer) => later(() => setTimeout(() => client.write(chunk), delayMs)));
      up.on('close', () => later(() => setTimeout(() => client.destroy(), delayMs)));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the slow link has no TCP address');
  return {
    address: `127.0.0.1:${address.port}`,
    get opened() {
      return opened;
    },
    cut: () => {
      isCut = true;
      for (const s of sockets) s.destroy();
    },
    blackhole: () => {
      held ??= [];
    },
    mend: () => {
      isCut = false;
      const waiting = held ?? [];
      held = null;
      for (const send of waiting) send();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
