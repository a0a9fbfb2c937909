/**
 * `kvmq serve`'s dashboard: mounted at /dashboard/ on the server's own port (HTTP/1.1 beside gRPC), over a
 * kvmq client on the server's own etcd endpoint, so a first `npm start` ends in a page to open.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { connect, type Client } from '../index.js';
import type { Dashboard } from '../dashboard/dashboard.js';
import type { HttpMount } from '../serve/index.js';
import { reportBackgroundError } from './store.js';

export const DASHBOARD_PREFIX = '/dashboard';

export class ServeDashboard {
  private dashboard: Dashboard | null = null;
  private client: Client | null = null;

  /** Answers 503 until `start` has connected its client. */
  readonly mount: HttpMount = {
    prefix: DASHBOARD_PREFIX,
    handler: (req: IncomingMessage, res: ServerResponse) => {
      if (this.dashboard !== null) {
        this.dashboard(req, res);
        return;
      }
      req.resume();
      res.writeHead(503, { 'content-type': 'text/plain; charset=utf-8', 'retry-after': '1' });
      res.end('kvmq serve: the dashboard is starting\n');
    },
  };

  /** Connects a client to the server it is mounted in; returns the dashboard's address. */
  async start(host: string, port: number, token: string | undefined): Promise<string> {
    const { createDashboard } = await import('../dashboard/dashboard.js');
    const urlHost = host.includes(':') ? `[${host}]` : host;
    // A wildcard address is reached on loopback; any other is the address the server is bound to.
    const reach = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : urlHost;
    this.client = await connect(`etcd://${reach}:${port}`, { maintenance: false, onError: reportBackgroundError });
    this.dashboard = createDashboard(this.client, {
      basePath: DASHBOARD_PREFIX,
      ...(token === undefined ? {} : { token }),
    });
    return `http://${urlHost}:${port}${DASHBOARD_PREFIX}/`;
  }

  /** Ends live streams and closes the client: before the server closes. */
  async close(): Promise<void> {
    this.dashboard?.close();
    await this.client?.close();
  }
}
