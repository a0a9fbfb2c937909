/**
 * One test's world: a fresh store namespace, a client on it, and cleanup that
 * leaves nothing behind (children killed, workers stopped, clients closed).
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import {
  connect,
  type BatchHandler,
  type BatchWorkerOptions,
  type Client,
  type ConnectOptions,
  type Handler,
  type Worker,
  type WorkerOptions,
} from '../../src/index.js';
import { spawnChild, type Child } from './child.js';
import { uniqueQueue } from './names.js';
import type { CapabilityFlag, StoreFixture } from './fixture.js';
import { Trail } from './trail.js';
import { storeOf } from '../../src/client/client-store.js';

/** A hang becomes a failure long before the runner's own limits. */
export const TEST_TIMEOUT_MS = 30_000;

/**
 * Worker options every test gets unless it sets them: a short end-of-queue
 * backoff keeps the suite quick on stores without wake-ups.
 */
const WORKER_DEFAULTS: WorkerOptions = { eoqBackoffMs: 50 };

export interface Harness {
  readonly fixture: StoreFixture;
  /** This test's namespace; every client of the test connects to it. */
  readonly url: string;
  readonly client: Client;
  /** Errors workers and clients reported through `onError`; the test fails unless it empties this. */
  readonly errors: unknown[];
  /** Another client on the same namespace, closed after the test. */
  connect(options?: ConnectOptions): Promise<Client>;
  /** A queue name unique to this test. */
  queue(label?: string): string;
  /** A worker (on `client` unless another is given), force-stopped after the test. */
  worker<P = unknown, R = unknown>(
    queue: string,
    handler: Handler<NoInfer<P>, NoInfer<R>>,
    options?: WorkerOptions,
    on?: Client,
  ): Worker;
  /** A batch worker (option `batch`), force-stopped after the test. */
  batchWorker<P = unknown, R = unknown>(
    queue: string,
    handler: BatchHandler<NoInfer<P>, NoInfer<R>>,
    options: BatchWorkerOptions,
  ): Worker;
  /** A child process running a fixture script, SIGKILLed after the test if still alive. */
  spawn(script: string, args: readonly string[]): Child;
  /** Runs `fn` after the test, once its clients are closed. */
  cleanup(fn: () => void | Promise<void>): void;
  /** What the test's workers did; a failing test's error ends with it (notes of the test's own welcome). */
  readonly trail: Trail;
}

export interface StoreTestOptions {
  /**
   * Runs only where the store declares this capability; the test's name starts with it. A fixture that says the
   * store lacks it (the suite checks the store agrees) does not declare the test; otherwise it is skipped.
   */
  readonly capability?: CapabilityFlag;
  readonly timeoutMs?: number;
}

/** Declares a test that runs with its own harness on the fixture's store. */
export function storeTest(
  fixture: StoreFixture,
  name: string,
  fn: (h: Harness, t: TestContext) => void | Promise<void>,
  options: StoreTestOptions = {},
): void {
  const { capability } = options;
  if (capability !== undefined && fixture.capabilities?.[capability] === false) return;
  const title = capability === undefined ? name : `${capability}: ${name}`;
  void test(title, { timeout: options.timeoutMs ?? TEST_TIMEOUT_MS }, async (t) => {
    const h = await openHarness(t, fixture);
    if (capability !== undefined && !storeOf(h.client).capabilities[capability]) {
      t.skip(`${fixture.name} does not declare ${capability}`);
      return;
    }
    try {
      await fn(h, t);
    } catch (error) {
      throw h.trail.explain(error);
    }
  });
}

async function openHarness(t: TestContext, fixture: StoreFixture): Promise<Harness> {
  const url = await fixture.url();
  const errors: unknown[] = [];
  const trail = new Trail();
  const onError = (error: unknown): void => {
    errors.push(error);
    trail.note(`onError: ${String(error)}`);
    t.diagnostic(`onError: ${error instanceof Error ? error.message : String(error)}`);
  };
  const clients: Client[] = [];
  const workers: Worker[] = [];
  const children: Child[] = [];
  const cleanups: (() => void | Promise<void>)[] = [];

  t.after(async () => {
    // Children first: a hung child may hold what the others wait for.
    await Promise.all(children.map((child) => child.kill('SIGKILL')));
    // Two stops: the first asks for a graceful stop, the second ends hung handlers at once.
    await Promise.all(workers.map((worker) => Promise.all([worker.stop(), worker.stop()])));
    await Promise.all(clients.map((client) => client.close()));
    for (const fn of cleanups) await fn();
    for (const worker of workers) assert.equal(worker.running, false, `worker ${worker.id} still running`);
    // Recovered errors (a store call that failed and was retried) still mean something went wrong.
    assert.deepEqual(errors.map(String), [], 'errors reported through onError');
  });

  const open = async (options: ConnectOptions = {}): Promise<Client> => {
    const client = await connect(url, { onError, ...options });
    clients.push(client);
    trail.watchClaims(storeOf(client));
    return client;
  };
  const client = await open();
  return {
    fixture,
    url,
    client,
    errors,
    connect: open,
    queue: uniqueQueue,
    worker<P, R>(queue: string, handler: Handler<P, R>, options: WorkerOptions = {}, on = client) {
      const worker = on.worker<P, R>(queue, trail.wrap(handler), { ...WORKER_DEFAULTS, onError, ...options });
      trail.watch(worker);
      workers.push(worker);
      return worker;
    },
    batchWorker<P, R>(queue: string, handler: BatchHandler<P, R>, options: BatchWorkerOptions) {
      const worker = client.worker<P, R>(queue, trail.wrap(handler), { ...WORKER_DEFAULTS, onError, ...options });
      trail.watch(worker);
      workers.push(worker);
      return worker;
    },
    spawn(script, args) {
      const child = spawnChild(script, args);
      children.push(child);
      return child;
    },
    cleanup(fn) {
      cleanups.push(fn);
    },
    trail,
  };
}
