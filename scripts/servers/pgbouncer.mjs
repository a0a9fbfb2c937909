/**
 * PgBouncer from Debian's `pgbouncer` package in transaction pooling mode, in front of a PostgreSQL server the
 * caller started (scripts/servers/postgres.mjs): its config, user list, log and pid file in a temporary dir,
 * listening on a free loopback port. Every database name is passed through to that server, and each client
 * transaction gets whichever server connection is free, as in production behind a transaction pooler (so
 * session state, such as LISTEN or a session advisory lock, does not stay with the client).
 *
 * The Debian package is installed first when missing and running as root. PgBouncer refuses to run as root: as root (CI) it runs as the `postgres` system user, which owns the dir.
 * `start(dir, { port, password })` returns `{ url, port, stop() }`; `url` logs in as `postgres`.
 */
import { chownSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { ensurePackages, freePort, spawnServer, waitUntilReady } from '../servers.mjs';

export const packages = ['pgbouncer'];
export const binary = 'pgbouncer';
const SYSTEM_USER = 'postgres';

const asRoot = () => process.getuid?.() === 0;

/** True once the port accepts a TCP connection. */
function listening(port) {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** The uid and gid of a system user, from `id`'s answers. */
async function systemUser() {
  const { execFileSync } = await import('node:child_process');
  const id = (flag) => Number(execFileSync('id', [flag, SYSTEM_USER], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

/**
 * Starts PgBouncer in `dir`, pooling per transaction towards the PostgreSQL server on 127.0.0.1:`port` whose
 * `postgres` user has `password`.
 */
export async function start(dir, { port: serverPort, password, poolSize = 20 }) {
  // Installed on first use as root (CI), as scripts/servers.mjs does for the store servers.
  ensurePackages('pgbouncer', packages, binary);
  const port = await freePort();
  const ini = join(dir, 'pgbouncer.ini');
  const users = join(dir, 'userlist.txt');
  writeFileSync(users, `"postgres" "${password}"\n`, { mode: 0o600 });
  writeFileSync(
    ini,
    [
      '[databases]',
      `* = host=127.0.0.1 port=${serverPort}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = scram-sha-256',
      `auth_file = ${users}`,
      'pool_mode = transaction',
      `default_pool_size = ${poolSize}`,
      'max_client_conn = 500',
      'ignore_startup_parameters = extra_float_digits,options',
      `logfile = ${join(dir, 'pgbouncer.log')}`,
      `pidfile = ${join(dir, 'pgbouncer.pid')}`,
      '',
    ].join('\n'),
  );
  let command = 'pgbouncer';
  let args = [ini];
  if (asRoot()) {
    const { uid, gid } = await systemUser();
    for (const path of [dir, ini, users]) chownSync(path, uid, gid);
    command = 'setpriv';
    args = ['--reuid', SYSTEM_USER, '--regid', SYSTEM_USER, '--init-groups', '--', 'pgbouncer', ini];
  }
  const server = spawnServer(command, args);
  await waitUntilReady('pgbouncer', server, () => listening(port));
  return {
    url: `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`,
    port,
    async stop() {
      if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGINT');
      await server.exited;
    },
  };
}
