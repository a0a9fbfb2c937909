/**
 * `node --import tsx bench/rate-limit.ts [--store URL] [--max N] [--per-ms N] [--seconds N] [--processes N]
 *  [--workers N]`
 *
 * A queue-wide rate limit kept in the store, across processes: the queue gets rateLimit 100 per 1000 ms
 * (`--max`, `--per-ms`) and a backlog far larger than the limit lets through; 2 child processes
 * (`--processes`) each start 4 workers (`--workers`) at one agreed moment and count the messages they
 * handle for 60 s (`--seconds`). The target: 6,000 ± 5 % handled in all (the limit's rate × time;
 * an idle queue's first `max` come at once, so 6,100 is what the limit allows). Each process also counts its
 * claims on the store: workers that sleep until the next slot make about one claim per message, not a loop.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { connect, type Client, type Worker } from '../src/index.js';
import { step, whole } from './common.js';
import { storeOf } from '../src/client/client-store.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BATCH = 1000;
// Children need a moment to start tsx and connect before the agreed start.
const START_DELAY_MS = 5000;

const { values } = parseArgs({
  options: {
    store: { type: 'string' },
    max: { type: 'string' },
    'per-ms': { type: 'string' },
    seconds: { type: 'string' },
    processes: { type: 'string' },
    workers: { type: 'string' },
    // Internal: run as one of the worker processes.
    child: { type: 'string' },
    'start-at': { type: 'string' },
  },
});

interface ChildReport {
  readonly handled: number;
  readonly claims: number;
}

if (values.child !== undefined) {
  const report = await runChild(
    values.store ?? '',
    values.child,
    Number(values.workers),
    Number(values['start-at']),
    Number(values.seconds) * 1000,
  );
  process.stdout.write(`${JSON.stringify(report)}\n`);
} else {
  await runParent();
}

/** Counts the claims the client's workers make on its store. */
function countClaims(client: Client): () => number {
  const store = storeOf(client);
  const claim = store.claim.bind(store);
  let calls = 0;
  store.claim = (queue, request) => {
    calls += 1;
    return claim(queue, request);
  };
  return () => calls;
}

async function runChild(url: string, queue: string, workers: number, startAt: number, ms: number) {
  const client = await connect(url);
  const claims = countClaims(client);
  const end = startAt + ms;
  let handled = 0;
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, startAt - Date.now())));
  const running: Worker[] = Array.from({ length: workers }, () =>
    client.worker(queue, () => {
      if (Date.now() < end) handled += 1;
    }),
  );
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, end - Date.now())));
  const counted = handled;
  const claimed = claims();
  await Promise.all(running.map((w) => w.stop()));
  await client.close();
  return { handled: counted, claims: claimed } satisfies ChildReport;
}

function child(url: string, queue: string, workers: number, startAt: number, seconds: number): Promise<ChildReport> {
  const args = ['--import', 'tsx', 'bench/rate-limit.ts', '--store', url, '--child', queue];
  args.push('--workers', String(workers), '--start-at', String(startAt), '--seconds', String(seconds));
  const proc = spawn(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  proc.stdout.setEncoding('utf8').on('data', (text: string) => (out += text));
  return new Promise((resolve, reject) => {
    proc.on('error', reject);
    proc.on('close', (code) => {
      if (code !== 0) reject(new Error(`worker process exited ${String(code)}`));
      else resolve(JSON.parse(out.trim()) as ChildReport);
    });
  });
}

async function runParent(): Promise<void> {
  const max = Number(values.max ?? 100);
  const perMs = Number(values['per-ms'] ?? 1000);
  const seconds = Number(values.seconds ?? 60);
  const processes = Number(values.processes ?? 2);
  const workers = Number(values.workers ?? 4);
  const tempDir = values.store === undefined ? mkdtempSync(join(tmpdir(), 'kvmq-bench-rate-')) : null;
  const url = values.store ?? `sqlite:${join(tempDir ?? '', 'bench.db')}`;
  const client = await connect(url);
  const queue = `bench-rate-${Date.now().toString(36)}`;
  const expected = (max * seconds * 1000) / perMs;
  // Twice what the limit lets through: the workers never run dry.
  const backlog = Math.ceil((expected + max) * 2);
  try {
    await client.configure(queue, { rateLimit: { max, perMs } });
    await step(`fill ${whole.format(backlog)}`, async () => {
      for (let sent = 0; sent < backlog; sent += BATCH) {
        const size = Math.min(BATCH, backlog - sent);
        await client.enqueueBatch(
          queue,
          Array.from({ length: size }, (_, i) => ({ payload: { i: sent + i } })),
        );
      }
    });
    const startAt = Date.now() + START_DELAY_MS;
    const reports = await step(`${processes} processes × ${workers} workers for ${seconds} s`, () =>
      Promise.all(Array.from({ length: processes }, () => child(url, queue, workers, startAt, seconds))),
    );
    const handled = reports.reduce((sum, r) => sum + r.handled, 0);
    const claims = reports.reduce((sum, r) => sum + r.claims, 0);
    const off = (handled - expected) / expected;
    process.stdout.write(
      [
        `store ${storeOf(client).kind}: rateLimit ${max} per ${perMs} ms, ${processes} processes × ${workers} workers, ${seconds} s`,
        `handled ${whole.format(handled)} (per process ${reports.map((r) => whole.format(r.handled)).join(', ')}); ` +
          `target ${whole.format(expected)} ± 5 %: ${(off * 100).toFixed(1)} % ${Math.abs(off) <= 0.05 ? 'ok' : 'FAIL'}`,
        `claims on the store ${whole.format(claims)} (${(claims / Math.max(1, handled)).toFixed(2)} per message handled)`,
        '',
      ].join('\n'),
    );
  } finally {
    await client.clear(queue);
    await client.close();
    if (tempDir !== null) rmSync(tempDir, { recursive: true, force: true });
  }
}
