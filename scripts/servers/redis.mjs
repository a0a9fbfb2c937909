/**
 * redis-server from Debian's package, durable as production would run it: AOF, fsync every second.
 *
 * `start(dir)` is what scripts/servers.mjs calls. Tests that need a server of
 * their own call `start(dir, { args })` with extra redis-server arguments
 * (`--requirepass`, `--maxmemory`...), and may `kill()` it (SIGKILL, as a
 * crash) and `restart()` it on the same port and directory, so it loads its AOF.
 * `startCluster(dir)` starts a Redis Cluster of three masters.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createConnection } from 'node:net';
import { join } from 'node:path';
import { freePorts, spawnServer, stopServer, waitUntilReady } from '../servers.mjs';

export const packages = ['redis-server'];
export const binary = 'redis-server';

/** True once the server answers PING (not while it loads its AOF, nor when it wants a password it lacks). */
function ping(port, password) {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port }, () => {
      if (password !== undefined) socket.write(`AUTH ${password}\r\n`);
      socket.write('PING\r\n');
    });
    let reply = '';
    socket.on('data', (data) => {
      reply += data.toString();
      if (reply.includes('+PONG') || reply.includes('-')) {
        socket.destroy();
        resolve(reply.includes('+PONG'));
      }
    });
    socket.once('error', () => resolve(false));
  });
}

/**
 * Starts redis-server in `dir` on a free loopback port.
 * Options: `args` (extra arguments), `password` (sets --requirepass; PING then authenticates),
 * `tls` ({ cert, key, ca } PEM files: also listen for TLS on a second port, `tlsUrl`).
 */
export async function start(dir, options = {}) {
  const [port, tlsPort = null] = await freePorts(options.tls === undefined ? 1 : 2);
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', ''];
  args.push('--appendonly', 'yes', '--appendfsync', 'everysec', '--daemonize', 'no', '--protected-mode', 'yes');
  if (options.password !== undefined) args.push('--requirepass', options.password);
  if (options.tls !== undefined) {
    const { cert, key, ca } = options.tls;
    args.push('--tls-port', String(tlsPort), '--tls-cert-file', cert, '--tls-key-file', key);
    args.push('--tls-ca-cert-file', ca, '--tls-auth-clients', 'no');
  }
  args.push(...(options.args ?? []));
  const launch = async () => {
    const server = spawnServer(binary, args);
    await waitUntilReady('redis-server', server, () => ping(port, options.password));
    return server;
  };
  const handle = {
    url: `redis://127.0.0.1:${port}`,
    port,
    tlsUrl: tlsPort === null ? null : `rediss://127.0.0.1:${tlsPort}`,
    dir,
    server: await launch(),
    stop: () => stopServer(handle.server),
    /** Ends the server with a signal (SIGKILL: a crash) and waits for it to exit. */
    async kill(signal = 'SIGKILL') {
      if (handle.server.child.exitCode === null && handle.server.child.signalCode === null) {
        handle.server.child.kill(signal);
      }
      await handle.server.exited;
    },
    /**
     * Stops the server (SIGKILL: a crash; SIGTERM: a clean shutdown) and starts it again on the
     * same port and directory; it reloads its AOF before answering.
     */
    async restart(signal = 'SIGKILL') {
      await handle.kill(signal);
      handle.server = await launch();
    },
  };
  return handle;
}

/** redis-cli against one local port; returns stdout. */
function cli(port, ...args) {
  const run = spawnSync('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`redis-cli ${args.join(' ')}: ${run.stderr}`);
  return run.stdout;
}

/**
 * Starts a Redis Cluster of `nodes` masters (default 3), each a server as
 * `start` makes it, in subdirectories of `dir`, and waits until every node
 * reports the cluster ok. `url` names every node, with `cluster=true`.
 */
export async function startCluster(dir, options = {}) {
  const count = options.nodes ?? 3;
  const nodes = [];
  const stop = () => Promise.all(nodes.map((node) => node.stop()));
  try {
    for (let i = 0; i < count; i++) {
      const nodeDir = join(dir, `node-${i}`);
      mkdirSync(nodeDir, { recursive: true });
      const clusterArgs = ['--cluster-enabled', 'yes', '--cluster-config-file', join(nodeDir, 'nodes.conf')];
      clusterArgs.push('--cluster-node-timeout', '5000');
      nodes.push(await start(nodeDir, { args: [...clusterArgs, ...(options.args ?? [])] }));
    }
    const addresses = nodes.map((node) => `127.0.0.1:${node.port}`);
    cli(nodes[0].port, '--cluster', 'create', ...addresses, '--cluster-replicas', '0', '--cluster-yes');
    const deadline = Date.now() + 30_000;
    while (!nodes.every((node) => /cluster_state:ok/.test(cli(node.port, 'CLUSTER', 'INFO')))) {
      if (Date.now() > deadline) throw new Error('the Redis Cluster did not become ok in 30 s');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return { url: `redis://${addresses.join(',')}?cluster=true`, nodes, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
