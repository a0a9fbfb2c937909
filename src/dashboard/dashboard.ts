/**
 * createDashboard(client, options): a Node request handler serving kvmq's web dashboard, to mount in an
 * http, express or fastify server under `basePath`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Client } from '../client/client.js';
import { KvmqError } from '../model/errors.js';
import { messageAction, queueAction } from './actions.js';
import { ASSET_FILES, ASSETS_VERSION } from './assets.js';
import { ChartSource } from './charts.js';
import { HttpError, readForm, redirect, send, sendHtml, sendJson } from './http.js';
import { LiveHub, liveQueue, type LiveSource } from './live.js';
import { checkDashboardOptions, type DashboardOptions, type DashboardSettings } from './options.js';
import type { PageContext } from './pages/context.js';
import { storeLabel } from './pages/format.js';
import { errorPage } from './pages/status.js';
import { route, type Route } from './router.js';
import { appendHeader, authenticate, Csrf, hostAllowed, sameOrigin, SECURITY_HEADERS } from './security.js';
import { clearView, knownQueue, MAX_QUEUES_SHOWN, messageView, queuesView, queueView } from './views.js';

export type { DashboardOptions } from './options.js';

/** A Node request handler; `close()` ends its live-update streams so the server around it can stop. */
export interface Dashboard {
  (req: IncomingMessage, res: ServerResponse): void;
  close(): void;
}

export function createDashboard(client: Client, options: DashboardOptions = {}): Dashboard {
  const settings = checkDashboardOptions(options);
  const csrf = new Csrf(settings.basePath);
  const live = new LiveHub(settings.maxLiveClients, settings.pollIntervalMs);
  const reader = settings.readFrom ?? client;
  const charts = new ChartSource(reader);
  const app = { client, reader, settings, csrf, live, charts };
  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    handle(app, req, res).catch((error: unknown) => {
      if (!res.headersSent) send(res, 500, 'text/plain; charset=utf-8', 'kvmq dashboard: internal error\n', 'no-store');
      else res.destroy(error instanceof Error ? error : undefined);
    });
  };
  return Object.assign(handler, { close: () => live.close() });
}

interface App {
  /** Takes the actions. */
  readonly client: Client;
  /** Answers the pages: the client, or the one of option `readFrom`. */
  readonly reader: Client;
  readonly settings: DashboardSettings;
  readonly csrf: Csrf;
  readonly live: LiveHub;
  readonly charts: ChartSource;
}

async function handle(app: App, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const { settings } = app;
  for (const [name, value] of Object.entries(SECURITY_HEADERS)) res.setHeader(name, value);
  const url = new URL(req.url ?? '/', 'http://dashboard.invalid');
  const base = settings.basePath;
  if (url.pathname !== base && !url.pathname.startsWith(`${base}/`)) {
    send(res, 404, 'text/plain; charset=utf-8', 'Not found\n', 'no-store');
    return;
  }
  if (!hostAllowed(req, settings)) {
    req.resume();
    const text = `kvmq dashboard: Host ${String(req.headers.host)} is not answered; use a loopback address\n`;
    send(res, 403, 'text/plain; charset=utf-8', text, 'no-store');
    return;
  }
  if (url.pathname === base) {
    redirect(res, `${base}/${url.search}`);
    return;
  }
  const ctx: PageContext = {
    base,
    csrf: app.csrf.tokenFor(app.csrf.session(req, res)),
    readOnly: settings.readOnly,
    store:
      app.reader === app.client
        ? storeLabel(app.client.url)
        : `${storeLabel(app.client.url)} (pages read from ${storeLabel(app.reader.url)})`,
    script: `${base}/assets/app.${ASSETS_VERSION}.js`,
    style: `${base}/assets/app.${ASSETS_VERSION}.css`,
  };
  const auth = authenticate(req, url, settings);
  if (auth === 'refused') {
    req.resume();
    const detail =
      'This dashboard needs its token. Open the address kvmq printed (it ends in ?token=…), ' +
      'or send the header Authorization: Bearer TOKEN.';
    sendHtml(res, 401, errorPage({ ...ctx, readOnly: true }, 401, detail));
    return;
  }
  if (auth !== 'ok') {
    appendHeader(res, 'Set-Cookie', auth.setCookie);
    url.searchParams.delete('token');
    redirect(res, url.pathname + url.search);
    return;
  }
  try {
    await dispatch(app, ctx, req, res, url);
  } catch (error) {
    const status = statusOf(error);
    const detail =
      error instanceof HttpError || error instanceof KvmqError || error instanceof TypeError
        ? error.message
        : 'The dashboard could not answer; the error is not shown here.';
    // A refused body may still be arriving: close rather than read it.
    if (!req.complete) res.setHeader('Connection', 'close');
    if (status === 500 && !(error instanceof KvmqError)) console.error('kvmq dashboard:', error);
    sendHtml(res, status, errorPage(ctx, status, detail));
  }
}

function statusOf(error: unknown): number {
  if (error instanceof HttpError) return error.status;
  if (error instanceof TypeError) return 400;
  if (error instanceof KvmqError && error.transient) return 503;
  return 500;
}

async function dispatch(
  app: App,
  ctx: PageContext,
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
): Promise<void> {
  const client = app.reader;
  const target = route(url.pathname.slice(ctx.base.length));
  const now = Date.now();
  if (req.method === 'POST') {
    redirect(res, await post(app, req, target, ctx.base));
    return;
  }
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.setHeader('Allow', 'GET, HEAD, POST');
    throw new HttpError(405, `${String(req.method)} is not answered here: pages are GETs, actions POSTs.`);
  }
  switch (target.page) {
    case 'queues':
      sendHtml(res, 200, await queuesView(client, ctx));
      return;
    case 'asset': {
      const asset = ASSET_FILES.get(target.name);
      if (asset === undefined) throw new HttpError(404, 'No such asset.');
      send(res, 200, asset.type, asset.body, 'public, max-age=31536000, immutable');
      return;
    }
    case 'live':
      openLive(app, req, res, '*', async () => {
        const names = (await client.queues()).slice(0, MAX_QUEUES_SHOWN);
        return Promise.all(names.map(async (queue) => liveQueue(await client.queueStatus(queue))));
      });
      return;
    case 'queue':
      await getQueue(app, ctx, req, res, url, target.queue, target.sub, now);
      return;
    case 'message':
      if (target.sub !== '') throw new HttpError(405, 'Actions are POSTs from the message page.');
      sendHtml(res, 200, await messageView(client, ctx, target.queue, target.id, url.searchParams, now));
      return;
  }
}

async function getQueue(
  app: App,
  ctx: PageContext,
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  queue: string,
  sub: Extract<Route, { page: 'queue' }>['sub'],
  now: number,
): Promise<void> {
  const client = app.reader;
  switch (sub) {
    case '': {
      const result = await queueView(client, ctx, queue, url.searchParams, now);
      if ('redirect' in result) redirect(res, result.redirect);
      else sendHtml(res, result.status, result.page);
      return;
    }
    case 'live':
      await knownQueue(client, queue);
      openLive(app, req, res, queue, async () => [liveQueue(await client.queueStatus(queue))]);
      return;
    case 'chart.json':
      await knownQueue(client, queue);
      try {
        sendJson(res, await app.charts.lastHour(queue, now));
      } catch (error) {
        // The script shows why there is no chart; the rest of the page is unaffected.
        sendJson(res, { error: error instanceof Error ? error.message : String(error) }, 503);
      }
      return;
    case 'clear':
      if (ctx.readOnly) throw new HttpError(403, 'This dashboard is read-only.');
      sendHtml(res, 200, await clearView(client, ctx, queue));
      return;
    default:
      throw new HttpError(405, 'Actions are POSTs from the queue page.');
  }
}

function openLive(app: App, req: IncomingMessage, res: ServerResponse, key: string, source: LiveSource): void {
  if (!app.live.open(req, res, key, source)) {
    res.setHeader('Retry-After', '30');
    throw new HttpError(503, 'Too many live connections are open; the page still works, reload it later.');
  }
}

/** Every check an action must pass before it runs: not read-only, same origin, a form with the right token. */
async function post(app: App, req: IncomingMessage, target: Route, base: string): Promise<string> {
  if (app.settings.readOnly) throw new HttpError(403, 'This dashboard is read-only: actions are turned off.');
  if (!sameOrigin(req)) throw new HttpError(403, 'Actions are accepted only from the dashboard’s own pages.');
  const form = await readForm(req);
  if (!app.csrf.valid(req, form.get('_csrf') ?? undefined)) {
    throw new HttpError(403, 'The form’s security token is missing or stale: reload the page and try again.');
  }
  if (target.page === 'queue' && target.sub !== '' && target.sub !== 'live' && target.sub !== 'chart.json') {
    return queueAction(app.client, base, target.queue, target.sub, form);
  }
  if (target.page === 'message' && target.sub !== '') {
    return messageAction(app.client, base, target.queue, target.id, target.sub);
  }
  throw new HttpError(405, 'Nothing to do here with a POST.');
}
