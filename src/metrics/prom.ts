/**
 * prom-client, loaded on first use: a process that never asks for metrics never loads it. It is an optional peer
 * dependency, installed by an app that exports metrics; without it, asking for them says so.
 */
import { importOptional } from '../model/optional-package.js';

type PromClient = typeof import('prom-client');

let loading: Promise<PromClient> | null = null;

export type { PromClient };

export function loadPromClient(): Promise<PromClient> {
  loading ??= importOptional('prom-client', 'metrics', () => import('prom-client'));
  // A failed load is tried again on the next use (the package may be installed by then).
  loading.catch(() => (loading = null));
  return loading;
}

/** Store round trips: from half a millisecond (a local SQLite file) to seconds (a struggling server). */
export const ROUND_TRIP_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

/** Handlers: from a millisecond to minutes. */
export const HANDLER_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];
