/**
 * The query options of a store URL. A leaf module: each store parses its own
 * URL with it, and src/store/url.ts imports every store.
 */
import { readFileSync } from 'node:fs';
import { StoreUrlError } from '../errors.js';

/** Parses `?a=b&c=d`, refusing keys not in `known` so a typo is not ignored. */
export function parseUrlOptions(url: string, query: string, known: readonly string[]): Map<string, string> {
  const options = new Map<string, string>();
  for (const [key, value] of new URLSearchParams(query)) {
    if (!known.includes(key)) {
      throw new StoreUrlError(
        `store URL ${JSON.stringify(url)} has unknown option '${key}'; known: ${known.join(', ') || 'none'}`,
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
