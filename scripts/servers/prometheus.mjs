/* global fetch */
/**
 * Prometheus from Debian's package, for the tests that scrape kvmq's metrics: a temporary configuration and
 * storage directory, a free loopback port, and a scrape of the given targets every second.
 * Not a store: scripts/servers.mjs does not start it; a test calls `ensure()` and `start(dir, targets)`.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ensurePackages, freePort, spawnServer, stopServer, waitUntilReady } from '../servers.mjs';

export const packages = ['prometheus'];
export const binary = 'prometheus';

/** Installs the package when missing (as root, as CI runs), or says how to. */
export function ensure() {
  ensurePackages('prometheus', packages, binary);
}

/** Starts Prometheus in `dir`, scraping each `HOST:PORT` of `targets` at /metrics every second. */
export async function start(dir, targets) {
  const port = await freePort();
  mkdirSync(dir, { recursive: true });
  const config = join(dir, 'prometheus.yml');
  const lines = [
    'global:',
    '  scrape_interval: 1s',
    '  scrape_timeout: 1s',
    'scrape_configs:',
    '  - job_name: kvmq',
    '    static_configs:',
    `      - targets: [${targets.map((t) => `'${t}'`).join(', ')}]`,
  ];
  writeFileSync(config, `${lines.join('\n')}\n`);
  const args = [
    `--config.file=${config}`,
    `--storage.tsdb.path=${join(dir, 'data')}`,
    `--web.listen-address=127.0.0.1:${port}`,
  ];
  const server = spawnServer(binary, args);
  const url = `http://127.0.0.1:${port}`;
  await waitUntilReady('prometheus', server, async () => (await fetch(`${url}/-/ready`)).ok);
  return { url, port, stop: () => stopServer(server) };
}
