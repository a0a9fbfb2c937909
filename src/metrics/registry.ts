/** The registry `client.metrics()` returns: the client's worker metrics and its queues' metrics. */
import type { Registry } from 'prom-client';
import type { Store } from '../stores/contract/contract.js';
import { QueueMetrics, type QueueSelection } from './queue-metrics.js';
import { loadPromClient } from './prom.js';
import { WorkerMetrics, type InFlightSource } from './worker-metrics.js';

export interface MetricsOptions {
  /**
   * Queues whose per-queue metrics (counts per state, paused, consumers, dry runs, oldest waiting age) are read
   * at each scrape. @defaultValue every queue of the store
   */
  readonly queues?: readonly string[];
}

/** A prom-client Registry: mount `await registry.metrics()` with `registry.contentType`. */
export type MetricsRegistry = Registry;

/** Makes the worker metrics of a client; the client attaches them to its workers. */
export async function createWorkerMetrics(workers: InFlightSource): Promise<WorkerMetrics> {
  return new WorkerMetrics(await loadPromClient(), workers);
}

/** A fresh registry holding `workerMetrics` and the selected queues' metrics. */
export async function createMetricsRegistry(
  store: Store,
  workerMetrics: WorkerMetrics,
  selection: QueueSelection,
): Promise<MetricsRegistry> {
  const prom = await loadPromClient();
  const registry = new prom.Registry();
  for (const metric of [...workerMetrics.all(), ...new QueueMetrics(prom, store, selection).all()]) {
    registry.registerMetric(metric);
  }
  return registry;
}
