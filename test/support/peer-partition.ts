/**
 * TCP proxies in front of the peer ports of an etcd cluster's members, so a test can cut one member off from
 * the others while its client port stays up: a network partition with that member in the minority.
 *
 * etcd members talk both ways over connections either side opens (each reads its peer's messages on a stream
 * it dialed, and posts to the peer's URL when no stream is up), so cutting the connections *to* a member is not
 * enough. Every raft request carries its sender's member id (the X-Server-From header); the proxy reads the
 * first request's headers of each connection to learn who sent it, and can then refuse a member both ways.
 */
import { createConnection, createServer, type Server, type Socket } from 'node:net';

export interface PeerPartition {
  /** For startCluster's `peerAddress` option: a proxy in front of member `name`'s peer port. */
  peerAddress(name: string, peerPort: number): Promise<string>;
  /** Drops and refuses every peer connection to and from member `name`, whose member id is `id` (hex). */
  isolate(name: string, id: string): void;
  /** Lets member `name` reach the others again. */
  heal(name: string): void;
  close(): Promise<void>;
}

interface Link {
  readonly from: string | null;
  readonly sockets: readonly Socket[];
}

interface Proxy {
  readonly name: string;
  readonly server: Server;
  readonly links: Set<Link>;
}

const HEADER_END = '\r\n\r\n';
const MAX_HEADER_BYTES = 16 * 1024;

/** The sender's member id in an etcd peer request's headers, or null (a request not from raft). */
function senderOf(head: string): string | null {
  return /^x-server-from:\s*([0-9a-f]+)\s*$/im.exec(head)?.[1] ?? null;
}

export function peerPartition(): PeerPartition {
  const proxies: Proxy[] = [];
  /** Isolated member name → its id. */
  const isolated = new Map<string, string>();
  const refused = (to: string, from: string | null): boolean =>
    isolated.has(to) || (from !== null && [...isolated.values()].includes(from));

  const serve = (name: string, peerPort: number, links: Set<Link>) => (client: Socket) => {
    client.on('error', () => undefined);
    if (isolated.has(name)) {
      client.destroy();
      return;
    }
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      head = Buffer.concat([head, chunk]);
      if (!head.includes(HEADER_END) && head.length < MAX_HEADER_BYTES) return;
      client.off('data', onData);
      client.pause();
      const from = senderOf(head.toString('latin1'));
      if (refused(name, from)) {
        client.destroy();
        return;
      }
      const upstream = createConnection({ host: '127.0.0.1', port: peerPort });
      upstream.on('error', () => undefined);
      const link: Link = { from, sockets: [client, upstream] };
      links.add(link);
      const drop = (): void => {
        links.delete(link);
        client.destroy();
        upstream.destroy();
      };
      client.on('close', drop);
      upstream.on('close', drop);
      upstream.write(head);
      client.pipe(upstream);
      upstream.pipe(client);
      client.resume();
    };
    client.on('data', onData);
  };

  return {
    async peerAddress(name, peerPort) {
      const links = new Set<Link>();
      const server = createServer(serve(name, peerPort, links));
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const address = server.address();
      if (address === null || typeof address === 'string') throw new Error('the peer proxy has no TCP address');
      proxies.push({ name, server, links });
      return `127.0.0.1:${address.port}`;
    },
    isolate(name, id) {
      isolated.set(name, id.toLowerCase());
      for (const proxy of proxies) {
        for (const link of proxy.links) {
          if (refused(proxy.name, link.from)) for (const socket of link.sockets) socket.destroy();
        }
      }
    },
    heal(name) {
      isolated.delete(name);
    },
    async close() {
      await Promise.all(
        proxies.map(
          (proxy) =>
            new Promise<void>((resolve) => {
              for (const link of proxy.links) for (const socket of link.sockets) socket.destroy();
              proxy.server.close(() => resolve());
            }),
        ),
      );
    },
  };
}
