/** Handlers that wait until released, so a test can break the store while a worker holds messages; timed stops. */
import type { Worker } from '../../src/index.js';

export interface GatedHandlers {
  /** The handler: counts its call, then waits for release() (it ignores its signal). */
  readonly handler: () => Promise<void>;
  /** Handler calls so far. */
  started(): number;
  release(): void;
}

export function gatedHandlers(): GatedHandlers {
  let started = 0;
  let open: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (open = resolve));
  return {
    handler: async () => {
      started += 1;
      await gate;
    },
    started: () => started,
    release: () => open(),
  };
}

/** Calls stop() `stops` times at once (twice: a forced stop) and resolves with how long they took, in ms. */
export async function timedStop(worker: Worker, stops: number): Promise<number> {
  const began = performance.now();
  await Promise.all(Array.from({ length: stops }, () => worker.stop()));
  return performance.now() - began;
}
