/**
 * etcd 3.4 from Debian's `etcd-server` package (with `etcd-client` for etcdctl), on loopback client and peer
 * ports in a temporary data dir, durable as production runs it (every write fsynced before it is answered).
 *
 * start(dir) gives one node; startCluster(dir, n) gives n members on 127.0.0.1. Every node can be stopped,
 * killed and started again on the same data dir and ports (`restart()`), so tests can check what survives.
 * etcdctl(endpoints, args) runs the real etcdctl (API v3) against them.
 */
import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { freePorts, spawnServer, stopServer, waitUntilReady } from '../servers.mjs';

// python3-etcd3gw: a plain JSON-gateway client, which the kvmq serve gateway test runs a queue with.
export const packages = ['etcd-server', 'etcd-client', 'python3-etcd3gw'];
export const binary = 'etcd';
export const ETCDCTL = 'etcdctl';

// etcd 3.4 refuses to start on architectures it does not officially support unless told to.
const SUPPORTED_ARCHES = new Set(['x64']);

function etcdEnv() {
  const env = { ...process.env, ETCDCTL_API: '3' };
  if (!SUPPORTED_ARCHES.has(process.arch)) env.ETCD_UNSUPPORTED_ARCH = process.arch === 'x64' ? 'amd64' : process.arch;
  return env;
}

/**
 * Runs etcdctl with the given endpoints (comma-separated host:port) and arguments.
 * Resolves with { code, stdout, stderr }; `input` is written to its stdin.
 */
export function etcdctl(endpoints, args, { input, timeoutMs = 15_000, env = {} } = {}) {
  return new Promise((resolve) => {
    const child = spawn(ETCDCTL, [`--endpoints=${endpoints}`, '--dial-timeout=3s', ...args], {
      env: { ...etcdEnv(), ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      resolve({ code: -1, stdout, stderr: stderr + String(error) });
    });
    // 'close', not 'exit': the process may exit before its last output has been read.
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    // A command that exits without reading stdin closes the pipe under our write: that is no error.
    child.stdin.on('error', () => undefined);
    child.stdin.end(input ?? '');
  });
}

async function healthy(clientPort) {
  const { code } = await etcdctl(`127.0.0.1:${clientPort}`, ['endpoint', 'health'], { timeoutMs: 5000 });
  return code === 0;
}

/** One member: its data dir, ports and arguments, startable again on the same data after a stop or kill. */
function makeNode(dir, name, clientPort, peerPort) {
  const dataDir = join(dir, name);
  mkdirSync(dataDir, { recursive: true });
  return {
    name,
    dataDir,
    clientPort,
    peerPort,
    endpoint: `127.0.0.1:${clientPort}`,
    peerUrl: `http://127.0.0.1:${peerPort}`,
    // Where the other members reach this one: its own peer port, unless the caller put a proxy in between.
    advertisedPeerUrl: `http://127.0.0.1:${peerPort}`,
    server: null,
  };
}

function args(node, initialCluster, token, options) {
  const client = `http://127.0.0.1:${node.clientPort}`;
  return [
    `--name=${node.name}`,
    `--data-dir=${node.dataDir}`,
    `--listen-client-urls=${client}`,
    `--advertise-client-urls=${client}`,
    `--listen-peer-urls=${node.peerUrl}`,
    `--initial-advertise-peer-urls=${node.advertisedPeerUrl}`,
    `--initial-cluster=${initialCluster}`,
    '--initial-cluster-state=new',
    `--initial-cluster-token=${token}`,
    '--logger=zap',
    '--log-level=warn',
    // kvmq writes several revisions per message: compaction keeps the history (and the db) bounded.
    '--auto-compaction-mode=periodic',
    `--auto-compaction-retention=${options.compactionRetention ?? '1m'}`,
    ...(options.quotaBytes === undefined ? [] : [`--quota-backend-bytes=${options.quotaBytes}`]),
    ...(options.extraArgs ?? []),
  ];
}

async function launch(node) {
  node.server = spawnServer(binary, node.args, { env: etcdEnv() });
  await waitUntilReady(`etcd ${node.name}`, node.server, () => healthy(node.clientPort));
}

function controls(node) {
  return {
    get name() {
      return node.name;
    },
    get endpoint() {
      return node.endpoint;
    },
    get pid() {
      return node.server?.child.pid;
    },
    dataDir: node.dataDir,
    /** Stops the member gracefully (SIGTERM, then SIGKILL). */
    stop: async () => {
      if (node.server !== null) await stopServer(node.server);
    },
    /** Kills the member at once; its data dir stays. */
    kill: async (signal = 'SIGKILL') => {
      if (node.server === null || node.server.child.exitCode !== null || node.server.child.signalCode !== null) return;
      node.server.child.kill(signal);
      await node.server.exited;
    },
    /** Starts the member again on the same data dir and ports (stopping it first if running). */
    restart: async () => {
      if (node.server !== null) await stopServer(node.server);
      await launch(node);
    },
  };
}

/**
 * One etcd node. Options: compactionRetention ('1m'), quotaBytes, extraArgs; for startCluster also
 * peerAddress(name, peerPort): the host:port the other members reach that member at (a proxy the caller owns,
 * so it can cut the member off); by default its own peer port.
 */
export async function start(dir, options = {}) {
  const node = makeNode(dir, 'kvmq', ...(await freePorts(2)));
  node.args = args(node, `${node.name}=${node.peerUrl}`, `kvmq-${process.pid}-${Date.now()}`, options);
  await launch(node);
  const member = controls(node);
  return {
    url: `etcd://${node.endpoint}`,
    endpoints: node.endpoint,
    dir,
    member,
    stop: member.stop,
    kill: member.kill,
    restart: member.restart,
  };
}

/**
 * An n-member cluster on loopback. Returns its URL (every member listed), the members, leader() (the
 * member currently leading, from etcdctl endpoint status) and stop().
 */
export async function startCluster(dir, size = 3, options = {}) {
  const ports = await freePorts(2 * size);
  const nodes = [];
  for (let i = 1; i <= size; i++) nodes.push(makeNode(dir, `m${i}`, ports[2 * i - 2], ports[2 * i - 1]));
  if (options.peerAddress !== undefined) {
    for (const node of nodes) node.advertisedPeerUrl = `http://${await options.peerAddress(node.name, node.peerPort)}`;
  }
  const initialCluster = nodes.map((n) => `${n.name}=${n.advertisedPeerUrl}`).join(',');
  const token = `kvmq-cluster-${process.pid}-${Date.now()}`;
  for (const node of nodes) node.args = args(node, initialCluster, token, options);
  try {
    // Members wait for each other to form a quorum, so they start together.
    await Promise.all(nodes.map((node) => launch(node)));
  } catch (error) {
    await Promise.allSettled(nodes.map((node) => (node.server === null ? undefined : stopServer(node.server))));
    throw error;
  }
  const members = nodes.map(controls);
  const endpoints = nodes.map((n) => n.endpoint).join(',');
  return {
    url: `etcd://${endpoints}`,
    endpoints,
    members,
    /** The member that leads now, asking the members still up. */
    async leader() {
      for (const node of nodes) {
        const { code, stdout } = await etcdctl(node.endpoint, ['endpoint', 'status', '-w', 'json']);
        if (code !== 0) continue;
        const [status] = JSON.parse(stdout);
        const leaderId = status?.Status?.leader;
        const memberId = status?.Status?.header?.member_id;
        if (leaderId !== undefined && leaderId === memberId) return members[nodes.indexOf(node)];
        for (const other of nodes) {
          if (other === node) continue;
          const reply = await etcdctl(other.endpoint, ['endpoint', 'status', '-w', 'json']);
          if (reply.code !== 0) continue;
          const [otherStatus] = JSON.parse(reply.stdout);
          if (otherStatus?.Status?.header?.member_id === leaderId) return members[nodes.indexOf(other)];
        }
      }
      throw new Error('no etcd member reports a leader');
    },
    async stop() {
      await Promise.allSettled(members.map((member) => member.stop()));
    },
  };
}
