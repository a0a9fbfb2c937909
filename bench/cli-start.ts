/**
 * `node --import tsx bench/cli-start.ts [--cli PATH]... [--rounds N] [--warmup N] [--markdown]`
 *
 * How long the built `kvmq` command takes, as a whole process, beside `node -e 0` (Node starting and
 * exiting, nothing else): `kvmq --version`, and `kvmq status <queue>` on a SQLite file holding a few
 * messages. It builds nothing: each --cli is a built main.js (default dist/cli/main.js, so `npm run build`
 * first); give two, the old build and the new, to compare them in one run. Each round runs node -e 0 and
 * every CLI's two commands once, in an order that turns round by round, so a machine that speeds up or
 * slows down weighs on each alike. A ratio is taken per round (the command over that round's node -e 0)
 * and the median round counts. The targets: --version within 1.5 × node -e 0, status within 2 ×.
 * Speed is reported, never enforced.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { connect } from '../src/index.js';
import { median, quantile, table } from './common.js';

const { values } = parseArgs({
  options: {
    cli: { type: 'string', multiple: true },
    rounds: { type: 'string', default: '30' },
    warmup: { type: 'string', default: '3' },
    markdown: { type: 'boolean', default: false },
  },
});
const clis = (values.cli ?? ['dist/cli/main.js']).map((path) => resolve(path));
const rounds = Number(values.rounds);
const warmup = Number(values.warmup);

const TARGETS = { version: 1.5, status: 2 } as const;
const QUEUE = 'bench-cli-start';

interface Run {
  readonly label: string;
  readonly args: readonly string[];
}

/** Milliseconds from spawning `node ...args` to its exit; a failed run stops the bench. */
function timeProcess(args: readonly string[]): Promise<number> {
  return new Promise((done, fail) => {
    const start = performance.now();
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
    child.on('error', fail);
    child.on('close', (code) => {
      const ms = performance.now() - start;
      if (code === 0) done(ms);
      else fail(new Error(`node ${args.join(' ')} exited ${String(code)}:\n${stderr}`));
    });
  });
}

const dir = mkdtempSync(join(tmpdir(), 'kvmq-bench-cli-'));
try {
  const store = `sqlite:${join(dir, 'bench.db')}`;
  const client = await connect(store);
  await client.enqueueBatch(
    QUEUE,
    Array.from({ length: 10 }, (_, i) => ({ payload: `message ${i}` })),
  );
  await client.close();

  const baseline: Run = { label: 'node -e 0', args: ['-e', '0'] };
  const commands: Run[] = clis.flatMap((cli) => [
    { label: `${cli} --version`, args: [cli, '--version'] },
    { label: `${cli} status`, args: [cli, 'status', QUEUE, '--store', store] },
  ]);
  const runs = [baseline, ...commands];
  const times = new Map<Run, number[]>(runs.map((run) => [run, []]));
  const ratios = new Map<Run, number[]>(commands.map((run) => [run, []]));

  for (let round = -warmup; round < rounds; round++) {
    const order = runs.map((_, i) => runs[(i + Math.max(0, round)) % runs.length] as Run);
    const took = new Map<Run, number>();
    for (const run of order) took.set(run, await timeProcess(run.args));
    if (round < 0) continue;
    const base = took.get(baseline) ?? NaN;
    for (const run of runs) times.get(run)?.push(took.get(run) ?? NaN);
    for (const run of commands) ratios.get(run)?.push((took.get(run) ?? NaN) / base);
    process.stderr.write(`round ${round + 1}/${rounds}\r`);
  }
  process.stderr.write('\n');

  const ms = (samples: readonly number[]): string => median(samples).toFixed(1);
  const spread = (samples: readonly number[]): string => {
    const sorted = [...samples].sort((a, b) => a - b);
    return `${quantile(sorted, 0.1).toFixed(2)}–${quantile(sorted, 0.9).toFixed(2)}`;
  };
  const body = [
    [baseline.label, ms(times.get(baseline) ?? []), '1', '', ''],
    ...commands.map((run) => {
      const target = run.args[1] === '--version' ? TARGETS.version : TARGETS.status;
      const samples = ratios.get(run) ?? [];
      const ratio = median(samples);
      return [
        run.label,
        ms(times.get(run) ?? []),
        ratio.toFixed(2),
        spread(samples),
        `≤ ${target}: ${ratio <= target ? 'ok' : 'missed'}`,
      ];
    }),
  ];
  console.log(`${rounds} rounds, median wall time per process; ratio: the median round's command / node -e 0`);
  console.log(table(['process', 'median ms', 'ratio', 'ratio, 10th–90th pct', 'target'], body, values.markdown));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
