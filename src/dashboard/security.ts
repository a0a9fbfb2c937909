/**
 * Who may talk to the dashboard: the Host check (DNS rebinding), the token (header or cookie), the session
 * cookie that CSRF tokens are bound to, the Origin check on POSTs, and the headers every answer carries.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { DashboardSettings } from './options.js';

export const TOKEN_COOKIE = 'kvmq_token';
export const SESSION_COOKIE = 'kvmq_session';

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);

/** Equal strings, in time that does not depend on where they differ (hashes make the lengths equal). */
export function sameSecret(a: string, b: string): boolean {
  const digest = (text: string): Buffer => createHash('sha256').update(text).digest();
  return timingSafeEqual(digest(a), digest(b));
}

export function readCookies(req: IncomingMessage): Map<string, string> {
  const cookies = new Map<string, string>();
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0) cookies.set(part.slice(0, eq).trim(), part.slice(eq + 1).trim());
  }
  return cookies;
}

/** The Host header's name without its port, lower case; null when missing. */
function hostName(req: IncomingMessage): string | null {
  const host = req.headers.host;
  if (host === undefined || host === '') return null;
  const name = host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.split(':', 1)[0];
  return (name ?? '').toLowerCase();
}

/**
 * Without a token, a page another site's name resolves to loopback (DNS rebinding) must not be served:
 * only loopback names and the configured ones are. With a token, the browser never sends it to another name.
 */
export function hostAllowed(req: IncomingMessage, settings: DashboardSettings): boolean {
  if (settings.token !== null) return true;
  const name = hostName(req);
  return name !== null && (LOOPBACK_HOSTS.has(name) || settings.allowedHosts.has(name));
}

export type Authentication = 'ok' | 'refused' | { readonly setCookie: string };

/** Checks the token; a correct `?token=` asks for it to be kept as a cookie (and the URL cleaned). */
export function authenticate(req: IncomingMessage, url: URL, settings: DashboardSettings): Authentication {
  const token = settings.token;
  if (token === null) return 'ok';
  const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
  if (bearer !== undefined) return sameSecret(bearer, token) ? 'ok' : 'refused';
  const query = url.searchParams.get('token');
  if (query !== null) {
    if (!sameSecret(query, token)) return 'refused';
    return { setCookie: cookie(req, TOKEN_COOKIE, token, settings.basePath) };
  }
  const cookieToken = readCookies(req).get(TOKEN_COOKIE);
  return cookieToken !== undefined && sameSecret(cookieToken, token) ? 'ok' : 'refused';
}

/** HttpOnly and SameSite=Strict always; Secure when the request came over TLS (a mounting app's https). */
function cookie(req: IncomingMessage, name: string, value: string, basePath: string): string {
  const secure = 'encrypted' in req.socket && req.socket.encrypted === true ? '; Secure' : '';
  return `${name}=${value}; Path=${basePath === '' ? '/' : basePath}; HttpOnly; SameSite=Strict${secure}`;
}

/** CSRF tokens: an HMAC of the browser's session cookie under a key that lives as long as the dashboard. */
export class Csrf {
  private readonly key = randomBytes(32);

  constructor(private readonly basePath: string) {}

  /** The session of this request, made (and set as a cookie on `res`) when it has none. */
  session(req: IncomingMessage, res: ServerResponse): string {
    const existing = readCookies(req).get(SESSION_COOKIE);
    if (existing !== undefined && /^[A-Za-z0-9_-]{43}$/.test(existing)) return existing;
    const made = randomBytes(32).toString('base64url');
    appendHeader(res, 'Set-Cookie', cookie(req, SESSION_COOKIE, made, this.basePath));
    return made;
  }

  tokenFor(session: string): string {
    return createHmac('sha256', this.key).update(session).digest('base64url');
  }

  /** A POST's token is the one its own session cookie makes. */
  valid(req: IncomingMessage, token: string | undefined): boolean {
    const session = readCookies(req).get(SESSION_COOKIE);
    if (session === undefined || token === undefined) return false;
    return sameSecret(token, this.tokenFor(session));
  }
}

/** A POST from another origin is refused even with a token; browsers say where it came from. */
export function sameOrigin(req: IncomingMessage): boolean {
  const site = req.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin' && site !== 'none') return false;
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  try {
    return new URL(origin).host.toLowerCase() === (req.headers.host ?? '').toLowerCase();
  } catch {
    return false;
  }
}

export function appendHeader(res: ServerResponse, name: string, value: string): void {
  const current = res.getHeader(name);
  if (current === undefined) res.setHeader(name, value);
  else res.setHeader(name, [...(Array.isArray(current) ? current : [String(current)]), value]);
}

/**
 * No inline script or style, no framing, no sniffing; no referrer to other sites (same-origin keeps the
 * Origin header on the dashboard's own form posts, which `no-referrer` would turn into 'null').
 */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'X-Frame-Options': 'DENY',
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'same-origin',
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Resource-Policy': 'same-origin',
};
