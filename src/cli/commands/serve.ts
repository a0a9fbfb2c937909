/** `kvmq serve`: the light etcd v3 API server, with kvmq's queue dispatcher inside. */
import { parseCommandLine, expectPositionals } from '../args.js';
import type { Command } from '../command.js';
import { parseDuration } from '../duration.js';
import { EXIT_OK, UsageError } from '../errors.js';
import { commandUsage } from '../help.js';
import { checkMetricsAddress, METRICS_OPTION_HELP, serveMetrics } from '../metrics.js';
import { note, printJson, printLine } from '../output.js';
import type { ServeDashboard } from '../serve-dashboard.js';
import { untilStopped } from '../until-stopped.js';

const OPTIONS = {
  data: { type: 'string' },
  listen: { type: 'string' },
  'auto-compaction-retention': { type: 'string' },
  'cert-file': { type: 'string' },
  'key-file': { type: 'string' },
  'trusted-ca-file': { type: 'string' },
  'client-cert-auth': { type: 'boolean' },
  'dashboard-token': { type: 'string' },
  'no-dashboard': { type: 'boolean' },
  metrics: { type: 'string' },
} as const;

/** The server's warnings and errors, on stderr; its info messages would drown them. */
function logToStderr(level: 'info' | 'warn' | 'error', message: string): void {
  if (level !== 'info') process.stderr.write(`kvmq serve ${level}: ${message}\n`);
}

/** The file and the server's state may disagree after a storage failure: stop at once, before serving more. */
function exitOnStorageFailure(error: unknown): void {
  process.stderr.write(`kvmq serve: cannot continue after a storage failure: ${String(error)}\n`);
  process.exit(1);
}

const HOUR_MS = 3_600_000;

/** '1h', '30m', '90s', '1h30m' or '0' (off); a bare number is hours, as etcd's flag reads it. */
function parseRetention(text: string): number {
  if (/^\d+$/.test(text)) return Number(text) * HOUR_MS;
  try {
    return parseDuration('--auto-compaction-retention', text, 0);
  } catch {
    throw new UsageError(`--auto-compaction-retention must look like 1h, 30m or 90s (0 turns it off), got '${text}'`);
  }
}

export const serve: Command = {
  name: 'serve',
  summary: 'run an etcd v3 API server on an embedded store, dispatching queues',
  usage: commandUsage(
    'serve [--data DIR] [--listen HOST:PORT]',
    "Speaks etcd v3's gRPC API (KV, Watch, Lease, Auth, Maintenance, Cluster), so etcdctl and any etcd\n" +
      'client work against it, on an embedded store in DIR that fsyncs every write before answering.\n' +
      "Queues under /queue/ and /q/ are dispatched inside it (the etcd store's dispatcher): point kvmq at\n" +
      'it with --store etcd://HOST:PORT. The first SIGINT/SIGTERM stops it cleanly.',
    [
      ['--data DIR', 'directory of the database, created if missing (default ./kvmq-data)'],
      ['--listen HOST:PORT', 'address to serve on; port 0 picks a free one (default 127.0.0.1:2379)'],
      ['--auto-compaction-retention T', 'compact history older than T, e.g. 30m; 0 keeps it all (default 1h)'],
      ['--cert-file FILE', "serve TLS with this certificate (PEM), as etcd's flag; needs --key-file"],
      ['--key-file FILE', "the certificate's private key (PEM)"],
      ['--trusted-ca-file FILE', 'the CA (PEM) that signs client certificates'],
      ['--client-cert-auth', 'refuse clients without a certificate signed by --trusted-ca-file'],
      ['--dashboard-token T', 'serve the dashboard (at /dashboard/) on a non-loopback --listen, needing T'],
      ['--no-dashboard', 'do not serve the web dashboard at /dashboard/ on the same port'],
      METRICS_OPTION_HELP,
    ],
  ),

  async run(argv) {
    const { values, positionals } = parseCommandLine(argv, OPTIONS);
    expectPositionals(positionals, 0, 0, 'no arguments');
    if (values.store !== undefined) {
      throw new UsageError('kvmq serve is itself the store: give --data DIR (and --listen HOST:PORT), not --store');
    }
    const metricsAddress = checkMetricsAddress(values.metrics);
    // Loaded on use, like every store: other commands never pay for the server's modules.
    const { startServer, SERVE_DEFAULTS } = await import('../../serve/index.js');
    const metrics =
      metricsAddress === undefined ? null : await (await import('../../serve/metrics.js')).ServeMetrics.create();
    const dataDir = values.data ?? SERVE_DEFAULTS.dataDir;
    const retention = values['auto-compaction-retention'];
    const listen = values.listen ?? SERVE_DEFAULTS.listen;
    const dashboard = await dashboardWanted(values, listen);
    const server = await startServer({
      dataDir,
      listen,
      log: logToStderr,
      onFatal: exitOnStorageFailure,
      ...(retention === undefined ? {} : { autoCompactionRetentionMs: parseRetention(retention) }),
      ...(values['cert-file'] === undefined ? {} : { certFile: values['cert-file'] }),
      ...(values['key-file'] === undefined ? {} : { keyFile: values['key-file'] }),
      ...(values['trusted-ca-file'] === undefined ? {} : { trustedCaFile: values['trusted-ca-file'] }),
      ...(values['client-cert-auth'] === true ? { clientCertAuth: true } : {}),
      ...(dashboard === null ? {} : { httpMounts: [dashboard.mount] }),
      ...(metrics === null ? {} : { instruments: metrics }),
    });
    let metricsServer: { close(): Promise<void> } | null = null;
    if (metrics !== null && metricsAddress !== undefined) {
      metrics.bind(server);
      try {
        metricsServer = await serveMetrics(metrics.registry, metricsAddress);
      } catch (error) {
        await server.close();
        throw error;
      }
    }
    const dashboardUrl = await startDashboard(dashboard, server, values['dashboard-token']);
    const endpoint = server.url.slice(server.url.indexOf('://') + 3);
    if (values.json === true) printJson({ url: server.url, endpoint, data: dataDir, dashboard: dashboardUrl });
    else {
      printLine(`kvmq serve: etcd v3 API on ${server.url} (data in ${dataDir})`);
      // Environment variables, as the README sets them: etcdctl refuses a flag and its variable together.
      const target = server.url.startsWith('https:') ? `${server.url} ETCDCTL_CACERT=CA.pem` : endpoint;
      printLine(`  try: export ETCDCTL_API=3 ETCDCTL_ENDPOINTS=${target}`);
      printLine('       etcdctl put /queue/jobs/producer/hello world');
      if (dashboardUrl !== null) printLine(`  dashboard: ${dashboardUrl}`);
    }
    await untilStopped(async () => {
      await dashboard?.close();
      await metricsServer?.close();
      await server.close();
    });
    return EXIT_OK;
  },
};

/**
 * The dashboard is on unless --no-dashboard; under TLS it is off (its client would need the CA), and on an
 * address other machines reach it needs --dashboard-token.
 */
async function dashboardWanted(
  values: { 'no-dashboard'?: boolean; 'dashboard-token'?: string; 'cert-file'?: string },
  listen: string,
): Promise<ServeDashboard | null> {
  if (values['no-dashboard'] === true) return null;
  const token = values['dashboard-token'];
  if (token !== undefined && !/^[\x21-\x7e]{16,256}$/.test(token)) {
    throw new UsageError('--dashboard-token must be 16 to 256 printable characters without spaces');
  }
  if (values['cert-file'] !== undefined) {
    note('dashboard off: it is not served under TLS yet; run kvmq dashboard --store etcd://... beside it');
    return null;
  }
  const [{ isLoopback }, { parseListen }] = await Promise.all([
    import('../../dashboard/server.js'),
    import('../../serve/index.js'),
  ]);
  if (!isLoopback(parseListen(listen).host) && token === undefined) {
    note(`dashboard off: --listen ${listen} is reachable from other machines; give --dashboard-token T to serve it`);
    return null;
  }
  const { ServeDashboard } = await import('../serve-dashboard.js');
  return new ServeDashboard();
}

async function startDashboard(
  dashboard: ServeDashboard | null,
  server: { host: string; port: number },
  token: string | undefined,
): Promise<string | null> {
  if (dashboard === null) return null;
  try {
    return await dashboard.start(server.host, server.port, token);
  } catch (error) {
    note(`dashboard off: ${error instanceof Error ? error.message : String(error)}`);
    return null;
  }
}
