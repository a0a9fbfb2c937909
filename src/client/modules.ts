/**
 * The modules a client loads on demand: the worker's and the schedulers' (loaded by connect() beside the store,
 * so worker() stays synchronous, and never by a client without workers, such as `kvmq status`), and the
 * producer's tracing.
 */

export interface WorkerModules {
  readonly worker: typeof import('../worker/worker.js');
  readonly shared: typeof import('../schedule/shared.js');
}

let workerModules: WorkerModules | null = null;

/** The producer's tracing, loaded by connect() or by a client without workers on its first enqueue. */
let sendTracing: typeof import('../tracing/send.js') | null = null;

export async function loadWorkerModules(): Promise<void> {
  if (workerModules !== null) return;
  const [worker, shared] = await Promise.all([import('../worker/worker.js'), import('../schedule/shared.js')]);
  workerModules = { worker, shared };
}

/** The worker's modules; null until a connect() has loaded them. */
export function loadedWorkerModules(): WorkerModules | null {
  return workerModules;
}

export async function loadSendTracing(): Promise<typeof import('../tracing/send.js')> {
  sendTracing ??= await import('../tracing/send.js');
  return sendTracing;
}

/** The producer's tracing, if loaded already: the enqueue path then makes no promise more. */
export function loadedSendTracing(): typeof import('../tracing/send.js') | null {
  return sendTracing;
}
