/** The figures each store kind should reach on the 2-core bench machine; kinds without targets just report. */

export interface Targets {
  /** Full lifecycle at worker concurrency 64, one process, at least. */
  readonly lifecycle64PerSec: number;
  /** enqueueBatch, at least. */
  readonly batchedEnqueuePerSec: number;
  /** Enqueue-to-handler p50 under light load, at most. */
  readonly latencyP50Ms: number;
  /** Per-message enqueue and claim cost on the large backlog over the small one, at most. */
  readonly backlogCostRatio: number;
  /** Process RSS after each backlog, under. */
  readonly rssMb: number;
}

export const TARGETS: Readonly<Partial<Record<string, Targets>>> = {
  sqlite: {
    lifecycle64PerSec: 20_000,
    batchedEnqueuePerSec: 100_000,
    latencyP50Ms: 2,
    backlogCostRatio: 1.5,
    rssMb: 200,
  },
};
