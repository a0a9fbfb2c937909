/** The server's own HTTP/2 transport: a TCP server whose connections speak gRPC (./connection.ts). */
import { createServer, type Server } from 'node:net';
import type { EtcdError } from '../../errors.js';
import type { ServedMethod } from '../table.js';
import type { Transport } from '../grpc-transport.js';
import { Connection } from './connection.js';

/** Time running calls get to finish at shutdown before their connections are cut. */
const SHUTDOWN_GRACE_MS = 1000;

export async function listenH2(
  table: Map<string, ServedMethod>,
  host: string,
  port: number,
  receiveLimit: number,
  toEtcdError: (error: unknown) => EtcdError,
): Promise<Transport> {
  const connections = new Set<Connection>();
  const server: Server = createServer((socket) => {
    const conn = new Connection(socket, {
      table,
      receiveLimit,
      toEtcdError,
      onClose: (c) => connections.delete(c),
    });
    connections.add(conn);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  const bound = typeof address === 'object' && address !== null ? address.port : port;
  return {
    port: bound,
    close: () =>
      new Promise<void>((resolve) => {
        // The timers below stay referenced: shutting down keeps the process alive until it is done.
        server.close();
        for (const conn of connections) conn.shutdown();
        const deadline = setTimeout(() => {
          for (const conn of connections) conn.destroy();
          resolve();
        }, SHUTDOWN_GRACE_MS);
        const check = setInterval(() => {
          if (connections.size > 0) return;
          clearInterval(check);
          clearTimeout(deadline);
          resolve();
        }, 20);
      }),
  };
}
