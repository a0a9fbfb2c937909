/**
 * A worker's defaults, for the worker's options check and for the command line's help, which must not load
 * the worker to print them.
 */
import { SECOND } from './time.js';

export const WORKER_DEFAULTS = {
  concurrency: 1,
  prefetch: 0,
  lockMs: 30 * SECOND,
  throttleMs: 0,
  maxAttempts: 1,
  autoStart: true,
  schedules: true,
  stopGraceMs: 5 * SECOND,
  transactional: false,
} as const;
