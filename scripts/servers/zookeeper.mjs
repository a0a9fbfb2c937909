/**
 * ZooKeeper from Debian's `zookeeper` package (3.8), run by its Java main class on loopback ports in a
 * temporary data dir: Debian's zkServer.sh reads only /etc/zookeeper/conf, so kvmq writes its own zoo.cfg.
 *
 * start(dir) gives one standalone server; startEnsemble(dir, n) gives n nodes on 127.0.0.1 with their own
 * ports, each of which can be stopped (killed) and started again on the same data dir.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { join } from 'node:path';
import { freePorts, spawnServer, stopServer, waitUntilReady } from '../servers.mjs';

// python3-kazoo: the plain client the layout test and the kazoo benchmark use.
export const packages = ['zookeeper', 'python3-kazoo'];
// zookeeper.jar lists its dependencies in its manifest. zkCli.sh shows the package is installed.
const JAR = '/usr/share/java/zookeeper.jar';
export const binary = '/usr/share/zookeeper/bin/zkCli.sh';
const LOGGER = '/usr/share/java/slf4j-simple.jar';
export const zkCli = binary;

/** The classpath of the server and of kvmq's Java benchmark peers. */
export function classpath(extra = []) {
  return [JAR, ...(existsSync(LOGGER) ? [LOGGER] : []), ...extra].join(':');
}

/** Sends a four-letter word and resolves with the reply ('' on failure). */
export function fourLetterWord(port, word) {
  return new Promise((resolve) => {
    let reply = '';
    const socket = createConnection({ host: '127.0.0.1', port }, () => socket.write(word));
    socket.setTimeout(2000, () => socket.destroy());
    socket.on('data', (data) => (reply += data.toString()));
    socket.once('close', () => resolve(reply));
    socket.once('error', () => resolve(''));
  });
}

/** True once the node serves clients (standalone, leader or follower). */
async function serving(port) {
  return /Mode: (standalone|leader|follower)/.test(await fourLetterWord(port, 'srvr'));
}

function config(node, peers, options) {
  const lines = [
    `tickTime=${options.tickTime ?? 1000}`,
    'initLimit=10',
    'syncLimit=5',
    `dataDir=${node.dataDir}`,
    `clientPort=${node.clientPort}`,
    'clientPortAddress=127.0.0.1',
    'maxClientCnxns=0',
    'admin.enableServer=false',
    '4lw.commands.whitelist=ruok,srvr,stat,mntr,cons',
    // The default (100,000) snapshots a large tree too often for a 1M-message benchmark.
    `snapCount=${options.snapCount ?? 100_000}`,
  ];
  if (peers.length > 1) {
    for (const peer of peers) lines.push(`server.${peer.id}=127.0.0.1:${peer.quorumPort}:${peer.electionPort}`);
  }
  return `${lines.join('\n')}\n`;
}

/** One node: its own data dir and ports, startable again on the same data after a stop. */
function makeNode(dir, id, ports) {
  const dataDir = join(dir, `node${id}`);
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(join(dataDir, 'myid'), `${id}\n`);
  return { id, dataDir, cfg: join(dir, `node${id}.cfg`), ...ports, server: null };
}

async function launch(node, options) {
  const args = [
    `-Xmx${options.heap ?? '512m'}`,
    '-XX:+UseParallelGC',
    '-Dorg.slf4j.simpleLogger.defaultLogLevel=warn',
    '-Dzookeeper.admin.enableServer=false',
    '-cp',
    classpath(),
    'org.apache.zookeeper.server.quorum.QuorumPeerMain',
    node.cfg,
  ];
  node.server = spawnServer('java', args);
}

/**
 * n nodes on loopback. Returns { url, connect, nodes, stopNode(i), startNode(i), stop() }.
 * `url` is kvmq's zookeeper:// URL listing every node (no path: callers add their chroot).
 */
export async function startEnsemble(dir, n = 3, options = {}) {
  const ports = await freePorts(3 * n);
  const nodes = [];
  for (let id = 1; id <= n; id++) {
    const [clientPort, quorumPort, electionPort] = ports.slice(3 * (id - 1), 3 * id);
    nodes.push(makeNode(dir, id, { clientPort, quorumPort, electionPort }));
  }
  for (const node of nodes) writeFileSync(node.cfg, config(node, nodes, options));
  for (const node of nodes) await launch(node, options);
  try {
    await Promise.all(
      nodes.map((node) => waitUntilReady(`zookeeper node ${node.id}`, node.server, () => serving(node.clientPort))),
    );
  } catch (error) {
    await Promise.allSettled(nodes.map((node) => stopServer(node.server)));
    throw error;
  }
  const hosts = nodes.map((node) => `127.0.0.1:${node.clientPort}`).join(',');
  return {
    url: `zookeeper://${hosts}`,
    hosts,
    nodes,
    /** Kills node i (0-based) at once, as a crash would. */
    async killNode(i) {
      const server = nodes[i].server;
      if (server.child.exitCode !== null || server.child.signalCode !== null) return;
      server.child.kill('SIGKILL');
      await server.exited;
    },
    /** Stops node i gracefully. */
    async stopNode(i) {
      await stopServer(nodes[i].server);
    },
    /** Starts node i again on its data dir and ports, and waits until it serves. */
    async startNode(i) {
      const node = nodes[i];
      await launch(node, options);
      await waitUntilReady(`zookeeper node ${node.id}`, node.server, () => serving(node.clientPort));
    },
    async stop() {
      await Promise.allSettled(nodes.map((node) => (node.server ? stopServer(node.server) : undefined)));
    },
  };
}

/** One standalone server for the test run: `url` is zookeeper://127.0.0.1:PORT. */
export async function start(dir, options = {}) {
  const ensemble = await startEnsemble(dir, 1, options);
  const port = ensemble.nodes[0].clientPort;
  return { url: ensemble.url, port, dir, server: ensemble.nodes[0].server, ensemble, stop: () => ensemble.stop() };
}
