/**
 * Debian's chromium, for the dashboard's browser tests: installed (as root, as CI runs) with the same
 * ensurePackages the store servers use, so nothing downloads a browser of its own.
 */
import { ensurePackages } from '../servers.mjs';

export const packages = ['chromium'];
export const binary = '/usr/bin/chromium';

/** The browser's path, once its package is installed. */
export function ensureChromium() {
  ensurePackages('chromium', packages, 'chromium');
  return binary;
}
