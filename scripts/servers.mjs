#!/usr/bin/env node
/**
 * Starts the real store servers kvmq's tests and benchmarks run against, each
 * on a free loopback port in its own temporary directory, and stops them.
 * A server whose Debian package is missing is installed first when running as
 * root (as CI does); otherwise the error says which package to install.
 *
 * As a command:  node scripts/servers.mjs run [kind...] -- COMMAND [ARGS...]
 * runs COMMAND with KVMQ_TEST_<KIND>_URL set for each started server (every
 * kind when none is named), then stops them all.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Each kind: the Debian packages it needs, its main binary (named in errors), and how to start it. */
const KINDS = {
  redis: () => import('./servers/redis.mjs'),
  zookeeper: () => import('./servers/zookeeper.mjs'),
  etcd: () => import('./servers/etcd.mjs'),
  postgres: () => import('./servers/postgres.mjs'),
};

export const SERVER_KINDS = Object.keys(KINDS);

export function envName(kind) {
  return `KVMQ_TEST_${kind.toUpperCase()}_URL`;
}

/** A port nothing listens on now, on 127.0.0.1. */
export async function freePort() {
  const [port] = await freePorts(1);
  return port;
}

/**
 * `count` distinct ports nothing listens on now, on 127.0.0.1. Each stays bound until all are chosen: a port
 * closed at once can come back from the next listen(0), and a ZooKeeper node given one port twice refuses to
 * start.
 */
export async function freePorts(count) {
  const servers = [];
  try {
    for (let i = 0; i < count; i++) {
      const server = createServer();
      servers.push(server);
      await new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(0, '127.0.0.1', resolve);
      });
    }
    return servers.map((server) => server.address().port);
  } finally {
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(() => resolve()))));
  }
}

let aptUpdated = false;

/** The packages dpkg does not list as installed. */
function missingPackages(packages) {
  return packages.filter((name) => {
    const query = spawnSync('dpkg-query', ['-W', '-f=${Status}', name], { encoding: 'utf8' });
    return query.status !== 0 || !query.stdout.includes('install ok installed');
  });
}

/** Installs missing Debian packages when root; otherwise explains what to install. */
export function ensurePackages(kind, packages, binary) {
  const missing = missingPackages(packages);
  if (missing.length === 0) return;
  if (process.getuid?.() !== 0) {
    throw new Error(`${kind} tests need ${binary}: install it with  sudo apt-get install ${missing.join(' ')}`);
  }
  const apt = (args) => {
    const result = spawnSync('apt-get', args, {
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    });
    if (result.status !== 0) throw new Error(`apt-get ${args.join(' ')} failed`);
  };
  console.error(`kvmq tests: installing ${missing.join(' ')} from Debian's packages`);
  if (!aptUpdated) {
    apt(['update', '-qq']);
    aptUpdated = true;
  }
  apt(['install', '-y', '-qq', '--no-install-recommends', ...missing]);
}

/** Spawns a server process whose output goes to a log in its directory; rejects if it exits early. */
export function spawnServer(command, args, options = {}) {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], ...options });
  let output = '';
  const keep = (chunk) => {
    output = (output + chunk.toString()).slice(-20_000);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  return { child, exited, output: () => output };
}

/** Polls `ready()` until it resolves true; fails with the server's output if it exits or times out. */
export async function waitUntilReady(name, server, ready, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  let exited = false;
  void server.exited.then(() => (exited = true));
  while (Date.now() < deadline) {
    if (exited) throw new Error(`${name} exited while starting:\n${server.output()}`);
    if (await ready().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  server.child.kill('SIGKILL');
  throw new Error(`${name} did not become ready in ${timeoutMs} ms:\n${server.output()}`);
}

/** Stops a spawned server: SIGTERM, then SIGKILL if it lingers. */
export async function stopServer(server, graceMs = 5000) {
  if (server.child.exitCode !== null || server.child.signalCode !== null) return;
  server.child.kill('SIGTERM');
  const timer = setTimeout(() => server.child.kill('SIGKILL'), graceMs);
  await server.exited;
  clearTimeout(timer);
}

/**
 * Starts the named kinds (all by default). Returns the env entries that point
 * tests at them and a stop() that stops every server and removes its files.
 */
export async function startServers(kinds = SERVER_KINDS) {
  const started = [];
  const env = {};
  try {
    for (const kind of kinds) {
      const load = KINDS[kind];
      if (load === undefined) throw new Error(`unknown server kind '${kind}'; known: ${SERVER_KINDS.join(', ')}`);
      const module = await load();
      ensurePackages(kind, module.packages, module.binary);
      const dir = mkdtempSync(join(tmpdir(), `kvmq-${kind}-`));
      const server = await module.start(dir);
      started.push({ server, dir });
      env[envName(kind)] = server.url;
    }
  } catch (error) {
    await stopAll(started);
    throw error;
  }
  return { env, stop: () => stopAll(started) };
}

async function stopAll(started) {
  await Promise.allSettled(started.map(({ server }) => server.stop()));
  for (const { dir } of started) rmSync(dir, { recursive: true, force: true });
}

async function main(argv) {
  const [command, ...rest] = argv;
  const dash = rest.indexOf('--');
  if (command !== 'run' || dash < 0 || dash === rest.length - 1) {
    console.error('usage: node scripts/servers.mjs run [kind...] -- COMMAND [ARGS...]');
    process.exit(2);
  }
  const kinds = rest.slice(0, dash);
  const servers = await startServers(kinds.length > 0 ? kinds : SERVER_KINDS);
  const [cmd, ...args] = rest.slice(dash + 1);
  const child = spawn(cmd, args, { stdio: 'inherit', env: { ...process.env, ...servers.env } });
  const stop = () => child.kill('SIGTERM');
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  const code = await new Promise((resolve) => child.once('exit', (c, s) => resolve(c ?? (s ? 1 : 0))));
  await servers.stop();
  process.exit(code);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main(process.argv.slice(2)).catch((error) => {
    console.error(`kvmq servers: ${error.message}`);
    process.exit(1);
  });
}
