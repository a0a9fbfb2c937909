/**
 * The query options of a store URL. A leaf module: each store parses its own
 * URL with it, and src/stores/url.ts imports every store.
 */
import { readFileSync } from 'node:fs';
import { StoreUrlError } from '../../model/errors.js';

/**
 * A store URL as errors and banners show it: a password in it is `***`. Whatever parses the URL, this finds
 * the user information by the last `@` after `://`, so a password with `/`, `?` or `@` left unescaped is hidden
 * too (a query holding an `@` hides more than it needs, never less).
 */
export function redactUrl(url: string): string {
  const start = url.indexOf('://');
  const at = url.lastIndexOf('@');
  if (start < 0 || at < start) return url;
  const colon = url.indexOf(':', start + 3);
  if (colon < 0 || colon > at) return url;
  return `${url.slice(0, colon + 1)}***${url.slice(at)}`;
}

/**
 * The refusal of a store URL that cannot be used: the URL shown redacted, then why, then the accepted form. A
 * parser that split the URL at a `/`, `?`, `#` or `@` left unescaped in a password would name a piece of the
 * password in its reason: then the reason is that, and no piece is shown.
 */
export function urlRefusal(url: string, why: string, form: string): StoreUrlError {
  const shown = redactUrl(url);
  const secret = url.slice(url.indexOf('://') + 3, url.lastIndexOf('@'));
  const split = shown !== url && /[/?#@]/.test(secret.slice(secret.indexOf(':') + 1));
  const reason = split ? "the password holds '/', '?', '#' or '@': percent-encode it (%2F, %3F, %23, %40)" : why;
  return new StoreUrlError(`store URL ${JSON.stringify(shown)}: ${reason}; ${form}`);
}

/** Parses `?a=b&c=d`, refusing keys not in `known` so a typo is not ignored. */
export function parseUrlOptions(url: string, query: string, known: readonly string[]): Map<string, string> {
  const options = new Map<string, string>();
  for (const [key, value] of new URLSearchParams(query)) {
    if (!known.includes(key)) {
      throw new StoreUrlError(
        `store URL ${JSON.stringify(redactUrl(url))} has unknown option '${key}'; known: ${known.join(', ') || 'none'}`,
      );
    }
    options.set(key, value);
  }
  return options;
}

/** The PEM of a URL's `ca` option (a file name), or null without one; `fail` says why it cannot be read. */
export function readCaFile(file: string | undefined, fail: (why: string) => never): string | null {
  if (file === undefined) return null;
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    return fail(`cannot read the CA file ${file} (${error instanceof Error ? error.message : String(error)})`);
  }
}
