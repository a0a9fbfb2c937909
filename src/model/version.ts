import { readFileSync } from 'node:fs';

/** The version in package.json, one level up from both src/ and dist/: for the CLI and the tracer alike. */
export function version(): string {
  const text = readFileSync(new URL('../../package.json', import.meta.url), 'utf8');
  return (JSON.parse(text) as { version: string }).version;
}
