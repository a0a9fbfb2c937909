/**
 * What the peer benches share: the small interface each library sits behind, kvmq's side of it (the
 * public API), the order of the runs (each library in turn, the order reversed every other round, so drift
 * on a noisy machine hits all alike), the machine's load through the run, and the latency measurement.
 */
import { loadavg } from 'node:os';
import { connect, type Client, type QueueConfig, type WorkerOptions } from '../../src/index.js';
import { median, quantile, signal, sleepUntil, step } from '../common.js';

export type Payload = Record<string, number>;

/** What a bench does with one library, on one queue of its own. */
export interface Peer {
  readonly name: string;
  enqueue(payload: Payload): Promise<unknown>;
  /** One call of the library's bulk add. */
  enqueueBatch(payloads: readonly Payload[]): Promise<unknown>;
  /** Starts a worker; resolves once it is ready to take jobs. Its stop waits until every job is finished. */
  work(concurrency: number, handler: (payload: Payload) => void): Promise<{ stop(): Promise<void> }>;
  /** Deletes the queue's data and closes the connections. */
  close(): Promise<void>;
}

export type PeerFactory = (queue: string) => Promise<Peer>;

/**
 * kvmq through its public API, on the store the URL names, each queue configured with `config` (none: the
 * defaults) and its worker given `options(concurrency)` besides; no maintenance, as in every peer bench.
 */
export function kvmqFactory(
  url: string,
  config: Partial<QueueConfig> = {},
  options: (concurrency: number) => Pick<WorkerOptions, 'prefetch'> = () => ({}),
): PeerFactory {
  return async (queue) => {
    const client: Client = await connect(url, { maintenance: false });
    if (Object.keys(config).length > 0) await client.configure(queue, config);
    return {
      name: 'kvmq',
      enqueue: (payload) => client.enqueue(queue, payload),
      enqueueBatch: (payloads) =>
        client.enqueueBatch(
          queue,
          payloads.map((payload) => ({ payload })),
        ),
      async work(concurrency, handler) {
        const worker = client.worker(queue, (job) => handler(job.payload as Payload), {
          ...options(concurrency),
          concurrency,
          autoStart: false,
        });
        await worker.start();
        return { stop: () => worker.stop() };
      },
      async close() {
        await client.clear(queue);
        await client.close();
      },
    };
  };
}

/** Adds n small messages with the library's bulk add, `batch` per call, one call after another. */
export async function fillBatches(peer: Peer, n: number, batch: number): Promise<void> {
  for (let sent = 0; sent < n; sent += batch) {
    await peer.enqueueBatch(Array.from({ length: Math.min(batch, n - sent) }, (_, i) => ({ i: sent + i })));
  }
}

/** Waits for `done`, within a generous bound: a library that stops delivering ends the run with a message. */
export async function handledAll(done: Promise<void>, name: string, count: () => number, n: number): Promise<void> {
  const ms = 60_000 + n * 10;
  let timer: NodeJS.Timeout | undefined;
  const expiry = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${name} handled ${count()} of ${n} in ${ms / 1000} s`)), ms);
  });
  try {
    await Promise.race([done, expiry]);
  } finally {
    clearTimeout(timer);
  }
}

/** Starts a worker at `concurrency` on a filled queue; resolves once it handled n jobs and stopped. */
export async function drain(peer: Peer, n: number, concurrency: number): Promise<void> {
  let handled = 0;
  const all = signal();
  const worker = await peer.work(concurrency, () => {
    handled += 1;
    if (handled === n) all.fire();
  });
  await handledAll(all.promise, peer.name, () => handled, n);
  await worker.stop();
}

/** A measurement each library takes in turn: its label, and a run on a factory at full or warm-up size. */
export interface Measurement {
  readonly label: string;
  run(name: string, factory: PeerFactory, warmUp: boolean): Promise<void>;
}

/**
 * One measurement per phase in `chosen`: `measureOne` at the phase's size into the library's figures in
 * `results`, or at a tenth of it into scratch figures (`empty()`) to warm up.
 */
export function phaseMeasurements<P extends string, R>(
  phases: readonly (readonly [phase: P, label: string])[],
  chosen: ReadonlySet<string>,
  sizes: Readonly<Record<P, number>>,
  results: ReadonlyMap<string, R>,
  empty: () => R,
  measureOne: (phase: P, factory: PeerFactory, n: number, into: R) => Promise<void>,
): Measurement[] {
  const figures = (name: string | null): R => (name === null ? empty() : (results.get(name) ?? empty()));
  return phases
    .filter(([phase]) => chosen.has(phase))
    .map(([phase, label]) => ({
      label,
      run: (name, factory, warmUp) =>
        warmUp
          ? measureOne(phase, factory, Math.ceil(sizes[phase] / 10), figures(null))
          : measureOne(phase, factory, sizes[phase], figures(name)),
    }));
}

/** The latency phase: measureLatency's options, fresh queues, and each library's samples by name. */
export interface LatencyPhase {
  readonly options: { messages: number; perSec: number; concurrency: number };
  readonly freshQueue: () => string;
  readonly results: ReadonlyMap<string, { readonly latency: number[] }>;
}

/**
 * The latency phase as a measurement of its own, so it is warmed up and taken in the rounds' alternating order
 * like the others: measured once at the end in a fixed order, the first library met a cold server alone. Its
 * warm-up is a whole round, not a tenth: a tail quantile of an idle worker moves with how far the JIT has
 * compiled the library's path (kvmq's p99 on PostgreSQL fell from about 5 to 3 ms over its first 6,000
 * messages at 500/s, and stayed near 5 ms with V8's optimiser off), so a tenth measured the warm-up itself.
 * Each round's samples are pooled; the warm-up's are dropped.
 */
export function latencyMeasurement(phase: LatencyPhase): Measurement {
  const { options, freshQueue, results } = phase;
  return {
    label: 'latency',
    async run(name, factory, warmUp) {
      const samples = await measureLatency(factory, freshQueue(), options);
      if (!warmUp) results.get(name)?.latency.push(...samples);
    },
  };
}

/**
 * A warm-up of every measurement per library, then `runs` rounds of each library in turn, every other round
 * in reverse order (a library measured last in one round is first in the next). Returns the 1-minute load
 * average at the start of each round and at the end.
 */
export async function inTurn(
  peers: readonly (readonly [string, PeerFactory])[],
  runs: number,
  measurements: readonly Measurement[],
): Promise<number[]> {
  for (const [name, factory] of peers) {
    await step(`${name} warm-up`, async () => {
      for (const m of measurements) await m.run(name, factory, true);
    });
  }
  const loads: number[] = [];
  for (let run = 0; run < runs; run++) {
    loads.push(loadNow());
    const order = run % 2 === 0 ? peers : [...peers].reverse();
    for (const [name, factory] of order) {
      for (const m of measurements) await step(`${name} ${m.label}`, () => m.run(name, factory, false));
    }
  }
  loads.push(loadNow());
  return loads;
}

/**
 * The 1-minute load average over which this 2-core machine counts as busy. A busy machine flatters kvmq: a
 * library that sends many commands per message suffers more from a loaded server than one that sends few.
 */
export const BUSY_LOAD = 2;

export function loadNow(): number {
  return loadavg()[0] ?? 0;
}

export class BusyMachineError extends Error {}

/** Refuses to start a run whose figures would be taken on a busy machine, unless the caller allows it. */
export function refuseBusy(allowBusy: boolean): void {
  const load = loadNow();
  if (load > BUSY_LOAD && !allowBusy) {
    throw new BusyMachineError(
      `the machine is busy (load average ${load.toFixed(2)} > ${BUSY_LOAD}), and its figures would flatter kvmq; ` +
        'wait for a quiet machine, or pass --allow-busy for figures marked as taken busy',
    );
  }
}

/** Round by round, a's figure over b's (the rounds ran side by side, so drift between rounds cancels). */
export function roundRatios(a: readonly number[], b: readonly number[]): number[] {
  return a.slice(0, b.length).map((value, round) => value / (b[round] ?? NaN));
}

/** The median of per-round ratios with their range: "×2.91 (2.70–3.05)". */
export function ratioText(ratios: readonly number[]): string {
  if (ratios.length === 0) return '';
  const low = Math.min(...ratios);
  const high = Math.max(...ratios);
  const range = ratios.length > 1 ? ` (${low.toFixed(2)}–${high.toFixed(2)})` : '';
  return `×${median(ratios).toFixed(2)}${range}`;
}

/** The load averages of a run, and whether any was over BUSY_LOAD. */
export function loadText(loads: readonly number[]): { text: string; busy: boolean } {
  const busy = loads.some((load) => load > BUSY_LOAD);
  const text = `load average ${loads.map((load) => load.toFixed(2)).join(', ')} (each round's start, then the end)`;
  return { text: busy ? `${text}: BUSY, over ${BUSY_LOAD}` : text, busy };
}

/**
 * Enqueue-to-handler latencies: `messages` at `perSec` to an idle worker, from just before the add to
 * the handler's entry (the time travels in the payload).
 */
export async function measureLatency(
  factory: PeerFactory,
  queue: string,
  options: { messages: number; perSec: number; concurrency: number },
): Promise<number[]> {
  const peer = await factory(queue);
  try {
    const samples: number[] = [];
    const all = signal();
    const worker = await peer.work(options.concurrency, (payload) => {
      samples.push(performance.now() - (payload.t ?? 0));
      if (samples.length === options.messages) all.fire();
    });
    // Let the worker find the queue empty and go idle first.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const gapMs = 1000 / options.perSec;
    const start = performance.now();
    for (let i = 0; i < options.messages; i++) {
      await sleepUntil(start + i * gapMs);
      await peer.enqueue({ t: performance.now() });
    }
    await handledAll(all.promise, peer.name, () => samples.length, options.messages);
    await worker.stop();
    return samples;
  } finally {
    await peer.close();
  }
}

/** Each library's results by name, for the report; an empty set for one that did not run. */
export function resultsByName<R>(results: ReadonlyMap<string, R>, empty: () => R): (name: string) => R {
  return (name) => results.get(name) ?? empty();
}

/** The `q` quantile of latencies (ms) in the order they were measured. */
export function latencyQuantile(latencies: readonly number[], q: number): number {
  return quantile(
    [...latencies].sort((a, b) => a - b),
    q,
  );
}
