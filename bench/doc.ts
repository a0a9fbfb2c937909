/**
 * docs/benchmarks.md holds one section per store kind between
 * `<!-- bench:KIND -->` and `<!-- /bench:KIND -->`. A run rewrites its own
 * kind's section and keeps everything else.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

const INTRO = `# kvmq benchmarks

Produced by \`npm run bench -- --store URL\` (\`bench/run.ts\`); each store kind has its own section
below, which a run against that kind rewrites. \`npm run bench -- --quick\` is a smoke run with small sizes.

**Read the figures with care.** They come from a shared, noisy 2-core machine, where other jobs run at the
same time and absolute rates move by tens of percent from one run to the next (each section gives the load
average at its start). The ratios measured side by side in one run (kvmq against the raw store's own write
rate, a 1M backlog against a 10k one) say more than the absolute figures. Throughput rows are the median of
three runs, each on a fresh queue, with the slowest and fastest run beside them.

What each row measures (every measurement runs on its own fresh queue, after a warm-up on another):

- **enqueue single**: N \`client.enqueue\` calls with 64 in flight. **enqueue batched**: \`enqueueBatch\`, one
  call per batch. Compared with the **raw** store's own write rate: one small row per transaction, and rows in
  transactions of the same batch size, with the settings kvmq uses. kvmq/raw can pass 1 for single enqueues:
  kvmq gathers the calls in flight into one transaction, where the raw figure commits every row.
- **lifecycle**: a producer enqueues N messages (batched) while one worker with a no-op handler takes them;
  N over the time until the worker's graceful stop has all N finished in the store (checked with \`queueStatus\`).
- **latency**: messages at a steady light rate to one worker that goes idle between them; from just before
  \`enqueue\` to the handler's entry, with \`performance.now()\` carried in the payload.
- **backlog**: on a queue holding a 10k and then a 1M backlog (built with \`enqueueBatch\`), the per-message cost
  of enqueueing 10k more and of a worker (concurrency 64) draining 10k, and the process RSS after each.
  RSS at start is the floor: Node, the TypeScript loader the bench runs under (tsx, a loader thread of its
  own) and the opened store, before any message.
`;

export function writeSection(path: string, kind: string, body: string): void {
  const open = `<!-- bench:${kind} -->`;
  const close = `<!-- /bench:${kind} -->`;
  const section = `${open}\n${body.trim()}\n${close}`;
  const doc = existsSync(path) ? readFileSync(path, 'utf8') : INTRO;
  const start = doc.indexOf(open);
  const end = doc.indexOf(close);
  const next =
    start >= 0 && end > start
      ? doc.slice(0, start) + section + doc.slice(end + close.length)
      : `${doc.trimEnd()}\n\n${section}\n`;
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, next);
}
