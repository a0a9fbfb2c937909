/**
 * PostgreSQL from Debian's `postgresql` package, durable as production runs it (fsync on, each commit flushed
 * before it is answered), in a cluster of its own: initdb into a temporary data dir, the server on a free
 * loopback port with its unix socket in that dir. PostgreSQL refuses to run as root, so as root (CI) the dir is
 * handed to the `postgres` system user and initdb and the server run as that user (setpriv execs in place, so the
 * spawned process is the postmaster itself).
 *
 * `start(dir)` is what scripts/servers.mjs calls; its `url` logs in as the superuser `postgres` with a password
 * (TCP connections need one, so a wrong one is refused as in production). Tests may `kill()` the server
 * (SIGKILL of the postmaster and every backend, a crash), `stopImmediate()` it (`pg_ctl stop -m immediate`: no
 * checkpoint, crash recovery on the next start) and `restart()` it on the same port and data dir.
 * `startReplica(primary, dir)` adds a hot standby of a started server, streaming from it (pg_basebackup -R).
 */
import { spawn } from 'node:child_process';
import { chownSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, spawnServer, waitUntilReady } from '../servers.mjs';

export const packages = ['postgresql']; // psql comes with it (postgresql-client-N)
export const binary = 'postgres';
export const PASSWORD = 'kvmq-test';
const SYSTEM_USER = 'postgres';

/** The newest installed server's bin dir (/usr/lib/postgresql/<major>/bin), found rather than assumed. */
export function binDir() {
  const root = '/usr/lib/postgresql';
  const majors = existsSync(root)
    ? readdirSync(root)
        .filter((name) => /^\d+$/.test(name) && existsSync(join(root, name, 'bin', 'postgres')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (majors.length === 0) throw new Error(`no PostgreSQL server under ${root}: apt-get install ${packages.join(' ')}`);
  return join(root, majors[0], 'bin');
}

const asRoot = () => process.getuid?.() === 0;

/** The command and arguments that run a server binary, as the postgres user when this process is root. */
function command(bin, args) {
  const path = join(binDir(), bin);
  if (!asRoot()) return [path, args];
  return ['setpriv', ['--reuid', SYSTEM_USER, '--regid', SYSTEM_USER, '--init-groups', '--', path, ...args]];
}

/** Runs a server binary to its end; rejects with its output when it fails. */
function run(bin, args, env = {}) {
  const [cmd, argv] = command(bin, args);
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk.toString()));
    child.stderr.on('data', (chunk) => (output += chunk.toString()));
    child.once('error', reject);
    child.once('close', (code) => (code === 0 ? resolve(output) : reject(new Error(`${bin} failed:\n${output}`))));
  });
}

/** True once the server accepts connections (pg_isready over TCP). */
function ready(port) {
  return new Promise((resolve) => {
    const child = spawn(join(binDir(), 'pg_isready'), ['-q', '-h', '127.0.0.1', '-p', String(port), '-t', '2']);
    child.once('error', () => resolve(false));
    child.once('close', (code) => resolve(code === 0));
  });
}

/** The uid and gid of the postgres system user, from /etc/passwd. */
function systemUser() {
  const entry = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .map((line) => line.split(':'))
    .find((fields) => fields[0] === SYSTEM_USER);
  if (entry === undefined) throw new Error(`no '${SYSTEM_USER}' user: apt-get install ${packages.join(' ')}`);
  return { uid: Number(entry[2]), gid: Number(entry[3]) };
}

/**
 * Starts a PostgreSQL cluster in `dir` on a free loopback port.
 * Options: `settings` (extra `-c name=value` settings as an object).
 */
export async function start(dir, options = {}) {
  const port = await freePort();
  const data = join(dir, 'data');
  const pwfile = join(dir, 'pwfile');
  writeFileSync(pwfile, `${PASSWORD}\n`, { mode: 0o600 });
  if (asRoot()) {
    const { uid, gid } = systemUser();
    for (const path of [dir, pwfile]) chownSync(path, uid, gid);
  }
  await run('initdb', [
    '-D',
    data,
    '-U',
    'postgres',
    '--pwfile',
    pwfile,
    '--auth-local=trust',
    '--auth-host=scram-sha-256',
    '--encoding=UTF8',
    '--locale=C',
    '--no-instructions',
  ]);
  return serve(dir, data, port, options.settings);
}

/**
 * A hot standby of `primary` (a started server) in `dir`: a base backup taken over replication with the
 * superuser's password, which writes the standby's settings (-R), then a server on a port of its own that
 * replays the primary's WAL and answers reads.
 */
export async function startReplica(primary, dir) {
  const port = await freePort();
  const data = join(dir, 'data');
  const passfile = join(dir, 'pgpass');
  writeFileSync(passfile, `127.0.0.1:${primary.port}:*:postgres:${PASSWORD}\n`, { mode: 0o600 });
  if (asRoot()) {
    const { uid, gid } = systemUser();
    for (const path of [dir, passfile]) chownSync(path, uid, gid);
  }
  const from = ['-h', '127.0.0.1', '-p', String(primary.port), '-U', 'postgres'];
  await run('pg_basebackup', [...from, '-D', data, '-R', '-X', 'stream', '-c', 'fast', '-w'], { PGPASSFILE: passfile });
  return serve(dir, data, port, { hot_standby: 'on' });
}

// A start after a crash, refused while the old backends hold the shared memory, is tried this often, this far apart.
const RELAUNCH_TRIES = 40;
const RELAUNCH_PAUSE_MS = 250;

/** Runs the cluster in `data` on `port`, and the handle that stops, kills and restarts it. */
async function serve(dir, data, port, extra = {}) {
  const settings = {
    listen_addresses: '127.0.0.1',
    port: String(port),
    unix_socket_directories: dir,
    fsync: 'on',
    synchronous_commit: 'on',
    max_connections: '300',
    shared_buffers: '64MB',
    logging_collector: 'off',
    ...extra,
  };
  const args = ['-D', data, ...Object.entries(settings).flatMap(([name, value]) => ['-c', `${name}=${value}`])];
  const launch = async () => {
    const [cmd, argv] = command('postgres', args);
    // Its own process group, so a crash can take every backend with the postmaster.
    const server = spawnServer(cmd, argv, { detached: true });
    await waitUntilReady('postgres', server, () => ready(port));
    return server;
  };
  // After a crash the postmaster has exited, but a backend killed with it may not have yet (one in an fsync dies
  // when the write ends): it still holds the shared memory, and a start refuses to run beside it. Try again.
  const relaunch = async () => {
    for (let tries = 1; ; tries++) {
      try {
        return await launch();
      } catch (error) {
        if (tries >= RELAUNCH_TRIES || !/pre-existing shared memory block/.test(String(error))) throw error;
        await new Promise((resolve) => setTimeout(resolve, RELAUNCH_PAUSE_MS));
      }
    }
  };
  const alive = () => handle.server.child.exitCode === null && handle.server.child.signalCode === null;
  const handle = {
    url: `postgres://postgres:${PASSWORD}@127.0.0.1:${port}/postgres`,
    port,
    dir,
    data,
    server: await launch(),
    /** A fast shutdown (SIGINT: open sessions are ended), SIGKILL of the group if it lingers. */
    async stop() {
      if (!alive()) return;
      handle.server.child.kill('SIGINT');
      const timer = setTimeout(() => killGroup(handle.server.child, 'SIGKILL'), 10_000);
      await handle.server.exited;
      clearTimeout(timer);
    },
    /** Ends the postmaster and every backend with a signal (SIGKILL: a crash) and waits for it to exit. */
    async kill(signal = 'SIGKILL') {
      if (alive()) killGroup(handle.server.child, signal);
      await handle.server.exited;
    },
    /** `pg_ctl stop -m immediate`: every process quits at once, no checkpoint; the next start recovers. */
    async stopImmediate() {
      if (alive()) await run('pg_ctl', ['stop', '-D', data, '-m', 'immediate', '-w']);
      await handle.server.exited;
    },
    /** Stops the server (`kill(signal)`, or 'immediate' for stopImmediate) and starts it on the same port and dir. */
    async restart(signal = 'SIGKILL') {
      if (signal === 'immediate') await handle.stopImmediate();
      else await handle.kill(signal);
      handle.server = await relaunch();
    },
  };
  return handle;
}

function killGroup(child, signal) {
  try {
    process.kill(-child.pid, signal);
  } catch {
    // Already gone.
  }
}
