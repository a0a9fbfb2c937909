/**
 * `node --import tsx bench/cancel.ts [--store URL] [--rounds N]`
 *
 * How soon a running handler hears of its cancel: the time from `cancel()` returning to the handler's
 * `job.signal` firing `abort`, median (and max) of `rounds` (20). The worker and the cancel use two clients,
 * each with its own connections, so the notification travels through the store's server (on SQLite both are
 * in this process: the in-process path). Locks last a minute, so no renewal can be what tells the worker.
 * A negative figure: the abort came before `cancel()`'s answer did.
 */
import { parseArgs } from 'node:util';
import { connect } from '../src/index.js';

const { values } = parseArgs({
  options: { store: { type: 'string' }, rounds: { type: 'string', default: '20' } },
});
const rounds = Number(values.rounds);
const working = await connect(values.store, { maintenance: false });
const canceling = await connect(values.store, { maintenance: false });
const queue = `bench-cancel-${Date.now().toString(36)}`;

let started: (() => void) | null = null;
let abortedAt = 0;
let aborted: (() => void) | null = null;
const worker = working.worker(
  queue,
  (job) =>
    new Promise<void>((resolve) => {
      job.signal.addEventListener('abort', () => {
        abortedAt = performance.now();
        aborted?.();
        resolve();
      });
      started?.();
    }),
  { lockMs: 60_000 },
);

try {
  const figures: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const id = `m${i}`;
    const isRunning = new Promise<void>((resolve) => (started = resolve));
    const isAborted = new Promise<void>((resolve) => (aborted = resolve));
    await working.enqueue(queue, i, { id });
    await isRunning;
    const result = await canceling.cancel(queue, id);
    const returnedAt = performance.now();
    if (!result.ok) throw new Error(`cancel of ${id} was refused: ${String(result.state)}`);
    await isAborted;
    figures.push(abortedAt - returnedAt);
  }
  figures.sort((a, b) => a - b);
  const median = figures[Math.floor(figures.length / 2)] ?? NaN;
  const max = figures[figures.length - 1] ?? NaN;
  const kind = new URL(values.store ?? 'sqlite:').protocol.replace(':', '');
  console.log(
    `${kind}: cancel() returned → signal aborted, median ${median.toFixed(1)} ms, max ${max.toFixed(1)} ms ` +
      `(${rounds} rounds)`,
  );
} finally {
  await worker.stop();
  await working.close();
  await canceling.close();
}
