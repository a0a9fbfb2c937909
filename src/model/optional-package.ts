/**
 * Packages kvmq uses only for some features: the store drivers, prom-client for metrics, @opentelemetry/api for
 * tracing. They are optional peer dependencies (package.json), installed by the apps that use the feature; one
 * that is missing is refused with the package to install, not Node's "cannot find package" from inside kvmq.
 */
import { createRequire } from 'node:module';
import { PackageMissingError } from './errors.js';

const requireHere = createRequire(import.meta.url);

/** `error` is Node saying the package `name` itself cannot be found (not a module it loads in turn). */
export function isMissing(error: unknown, name: string): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as NodeJS.ErrnoException).code;
  if (code !== 'ERR_MODULE_NOT_FOUND' && code !== 'MODULE_NOT_FOUND') return false;
  return error.message.includes(`'${name}'`) || error.message.includes(`"${name}"`);
}

/** The package as an ES module import; `feature` says what needs it ("a redis store", "metrics"). */
export async function importOptional<T>(name: string, feature: string, load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (error) {
    throw isMissing(error, name) ? new PackageMissingError(feature, name, error) : error;
  }
}

/** The package through require() (CommonJS packages whose callers stay synchronous). */
export function requireOptional(name: string, feature: string): unknown {
  try {
    return requireHere(name);
  } catch (error) {
    throw isMissing(error, name) ? new PackageMissingError(feature, name, error) : error;
  }
}
