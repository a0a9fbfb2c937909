/** `kvmq dashboard`: the web dashboard over a store, on its own HTTP server. */
import { expectPositionals, parseCommandLine } from '../args.js';
import type { Command } from '../command.js';
import { EXIT_OK, UsageError } from '../errors.js';
import { commandUsage } from '../help.js';
import { printJson, printLine } from '../output.js';
import { openClient } from '../store.js';
import { redactUrl } from '../../stores/contract/url-options.js';
import { untilStopped } from '../until-stopped.js';

const OPTIONS = {
  listen: { type: 'string' },
  token: { type: 'string' },
  'read-only': { type: 'boolean' },
  'read-store': { type: 'string' },
} as const;

export const TOKEN_ENV = 'KVMQ_DASHBOARD_TOKEN';

export const dashboard: Command = {
  name: 'dashboard',
  summary: 'serve the web dashboard: queues, messages, charts and actions',
  usage: commandUsage(
    'dashboard [--listen HOST:PORT] [--token T] [--read-only] [--read-store URL]',
    'Serves a web dashboard over the store: every queue with its counts, charts of the last hour and\n' +
      'consumers; its messages by state; each message with its payload, history and last error; and the\n' +
      'actions retry, remove, run now, pause, resume and clear. It binds loopback by default; any other\n' +
      `address needs --token (or $${TOKEN_ENV}), which every request must then carry. The first\n` +
      'SIGINT/SIGTERM stops it.',
    [
      ['--listen HOST:PORT', 'address to serve on; port 0 picks a free one (default 127.0.0.1:7370)'],
      ['--token T', `require this token (16+ characters); default $${TOKEN_ENV}`],
      ['--read-only', 'hide and refuse every action'],
      ['--read-store URL', 'read the pages from this store instead (a PostgreSQL read replica); actions use --store'],
    ],
  ),

  async run(argv) {
    const { values, positionals } = parseCommandLine(argv, OPTIONS);
    expectPositionals(positionals, 0, 0, 'no arguments');
    // Loaded on use: other commands never pay for the dashboard's modules.
    const { startDashboardServer, parseDashboardListen, isLoopback } = await import('../../dashboard/server.js');
    const listen = values.listen ?? '127.0.0.1:7370';
    const token = values.token ?? (process.env[TOKEN_ENV] || undefined);
    if (!isLoopback(parseDashboardListen(listen).host) && token === undefined) {
      throw new UsageError(`--listen ${listen} is reachable from other machines: give --token to serve there`);
    }
    if (token !== undefined && !/^[\x21-\x7e]{16,256}$/.test(token)) {
      throw new UsageError('--token must be 16 to 256 printable characters without spaces');
    }
    const client = await openClient(values.store, { maintenance: false });
    const clients = [client];
    let running;
    try {
      const replica = values['read-store'];
      const readFrom = replica === undefined ? undefined : await openClient(replica, { maintenance: false });
      if (readFrom !== undefined) clients.push(readFrom);
      running = await startDashboardServer(client, {
        listen,
        ...(token === undefined ? {} : { token }),
        ...(readFrom === undefined ? {} : { readFrom }),
        readOnly: values['read-only'] === true,
      });
    } catch (error) {
      await Promise.all(clients.map((opened) => opened.close()));
      throw error;
    }
    const open = token === undefined ? running.url : `${running.url}?token=${encodeURIComponent(token)}`;
    const store = redactUrl(client.url);
    const reads = clients.length > 1 ? redactUrl(clients[1]?.url ?? '') : store;
    if (values.json === true) printJson({ url: running.url, store, readStore: reads });
    else printLine(`kvmq dashboard: ${open} (store ${store}${reads === store ? '' : `, pages read from ${reads}`})`);
    const server = running;
    await untilStopped(async () => {
      await server.close();
      await Promise.all(clients.map((opened) => opened.close()));
    });
    return EXIT_OK;
  },
};
