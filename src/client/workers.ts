/**
 * A client's workers: made on the worker modules connect() loaded, sharing one scheduler per queue, measured once
 * the client's metrics are asked for, and stopped when the client closes.
 */
import type { MetricsRegistry } from '../metrics/registry.js';
import type { WorkerMetrics } from '../metrics/worker-metrics.js';
import type { BatchHandler, Handler } from '../model/types.js';
import { checkQueueName } from '../model/validate.js';
import type { SharedSchedulers } from '../schedule/shared.js';
import type { Store } from '../stores/contract/contract.js';
import type { BatchWorkerOptions, Worker, WorkerOptions } from '../worker/worker.js';
import { loadedWorkerModules } from './modules.js';

export class ClientWorkers {
  private readonly running = new Set<Worker>();
  /** One scheduler per queue, shared by the workers that fire schedules; made with the first worker. */
  private schedulers: SharedSchedulers | null = null;
  /** The workers' metrics, made on the first `metrics()` call; null until then, so workers measure nothing. */
  private instruments: WorkerMetrics | null = null;
  private workerMetrics: Promise<WorkerMetrics> | null = null;

  constructor(private readonly store: Store) {}

  /** A new worker, started unless `autoStart: false`. */
  make(queue: string, handler: Handler | BatchHandler, options: WorkerOptions | BatchWorkerOptions): Worker {
    const stopped = (): void => void this.running.delete(worker);
    const workerModules = loadedWorkerModules();
    if (workerModules === null) throw new Error('this client was opened without workers: open it with connect()');
    this.schedulers ??= new workerModules.shared.SharedSchedulers(this.store);
    const worker = workerModules.worker.makeWorker(this.store, queue, handler, options, stopped, this.schedulers);
    this.running.add(worker);
    if (this.instruments !== null) attachMetrics(worker, this.instruments);
    if (worker.autoStart) worker.startInBackground();
    return worker;
  }

  /** A schedule of the queue changed: its scheduler, if this client runs one, looks again. */
  wake(queue: string): void {
    this.schedulers?.wake(queue);
  }

  /** A registry of the workers' metrics (made on the first call) and of the queues' (`queues`: unchecked). */
  async registry(queues: unknown): Promise<MetricsRegistry> {
    const selection = queues === undefined ? null : checkQueueList(queues);
    const { createMetricsRegistry, createWorkerMetrics } = await import('../metrics/registry.js');
    this.workerMetrics ??= createWorkerMetrics(() => this.running).then((metrics) => {
      this.instruments = metrics;
      for (const worker of this.running) attachMetrics(worker, metrics);
      return metrics;
    });
    return createMetricsRegistry(this.store, await this.workerMetrics, selection);
  }

  /** Stops every worker gracefully. */
  async stopAll(): Promise<void> {
    await Promise.all([...this.running].map((worker) => worker.stop()));
  }
}

function attachMetrics(worker: Worker, metrics: WorkerMetrics): void {
  metrics.startQueue(worker.queue);
  worker.instruments = metrics;
}

function checkQueueList(value: unknown): string[] {
  if (!Array.isArray(value)) throw new TypeError('metrics queues must be an array of queue names');
  return [...new Set(value.map(checkQueueName))];
}
