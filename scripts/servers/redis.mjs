/** redis-server from Debian's package, durable as production would run it: AOF, fsync every second. */
import { createConnection } from 'node:net';
import { freePort, spawnServer, stopServer, waitUntilReady } from '../servers.mjs';

export const packages = ['redis-server'];
export const binary = 'redis-server';

function ping(port) {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port }, () => socket.write('PING\r\n'));
    socket.once('data', (data) => {
      socket.destroy();
      resolve(data.toString().startsWith('+PONG'));
    });
    socket.once('error', () => resolve(false));
  });
}

export async function start(dir) {
  const port = await freePort();
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', ''];
  args.push('--appendonly', 'yes', '--appendfsync', 'everysec', '--daemonize', 'no', '--protected-mode', 'yes');
  const server = spawnServer(binary, args);
  await waitUntilReady('redis-server', server, () => ping(port));
  return { url: `redis://127.0.0.1:${port}`, port, dir, server, stop: () => stopServer(server) };
}
