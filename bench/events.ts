/**
 * `node --import tsx bench/events.ts [--store URL] [--rounds N] [--quick] [--baseline DIR]`
 *
 * What queue events cost: enqueue and the full lifecycle on queues with events off and on, side by side
 * in the same process, the two alternating run by run (each on a fresh queue), medians of the rounds.
 * `--baseline DIR` (another checkout of kvmq, e.g. from `git archive`) also runs events off on that
 * checkout's client, in the same rounds, to show events off costs what it did before.
 * The targets: with events on, at most 1.15 × the time without; with them off, within 5 %.
 * Each run's CPU time of this process is shown beside: on SQLite the store runs in it, and on a loaded machine
 * CPU time moves less than wall time (it does not count the waits for a core).
 */
import { besideBaseline, clientCases, rotatingRounds, type Case } from './beside-baseline.js';
import { median, table, whole } from './common.js';
import { runLifecycle } from './lifecycle.js';
import { storeOf } from '../src/client/client-store.js';

interface EventsCase extends Case {
  /** Events kept with events on (the default 10,000 if absent). */
  readonly eventsMaxCount?: number;
}

const bench = await besideBaseline('events', 1000);
const { scale, rounds, client, baselineClient } = bench;
const cases: EventsCase[] = [
  ...clientCases(scale),
  // The runs above keep fewer events than the default bound; here the bound is reached early, so most
  // transactions write into a queue at its bound and trimming by count runs all along, as on a busy queue.
  {
    label: 'lifecycle, concurrency 1, 1,000 events kept',
    n: 3000 * scale,
    run: (ctx, q, n) => runLifecycle(ctx, q, 1, n),
    eventsMaxCount: 1000,
  },
];

type Variant = 'off' | 'on' | 'baseline';

/** Times one run on a fresh queue: events off or on, or off on the baseline's client; wall and CPU ms. */
async function once(c: EventsCase, variant: Variant): Promise<[ms: number, cpuMs: number]> {
  const queue = bench.freshQueue(variant);
  const on = variant === 'baseline' && baselineClient !== null ? baselineClient : client;
  if (variant === 'off') await on.configure(queue, { events: false });
  if (variant === 'on') await on.configure(queue, { events: true, eventsMaxCount: c.eventsMaxCount ?? 10_000 });
  const cpu = process.cpuUsage();
  const ms = await c.run({ ...bench.ctx, client: on }, queue, c.n);
  const { user, system } = process.cpuUsage(cpu);
  return [ms, (user + system) / 1000];
}

try {
  const rows: string[][] = [];
  const variants: Variant[] = baselineClient === null ? ['off', 'on'] : ['off', 'on', 'baseline'];
  for (const c of cases) {
    const runs = await rotatingRounds(variants, rounds, (variant) => once(c, variant));
    const times = (v: Variant): number[] => (runs.get(v) ?? []).map(([ms]) => ms);
    const cpus = (v: Variant): number[] => (runs.get(v) ?? []).map(([, cpuMs]) => cpuMs);
    const ms = (v: Variant): number => median(times(v));
    const cpu = (v: Variant): number => median(cpus(v));
    const perSec = (v: Variant): string => whole.format((c.n * 1000) / ms(v));
    const ratio = (a: number, b: number): string => `${(a / b).toFixed(3)} ×`;
    const row = [c.label, whole.format(c.n), perSec('off'), perSec('on'), ratio(ms('on'), ms('off'))];
    row.push(ratio(cpu('on'), cpu('off')));
    if (baselineClient !== null) {
      row.push(perSec('baseline'), ratio(ms('off'), ms('baseline')), ratio(cpu('off'), cpu('baseline')));
    }
    rows.push(row);
    const list = (values: number[]): string => values.map(Math.round).join(', ');
    const spread = variants.map((v) => `${v} ${list(times(v))} ms (CPU ${list(cpus(v))})`);
    process.stderr.write(`bench: ${c.label}: ${spread.join('; ')}\n`);
  }
  const header = ['measurement', 'messages', 'events off /s', 'events on /s', 'time on/off', 'CPU on/off'];
  if (baselineClient !== null) header.push('baseline off /s', 'time off/baseline', 'CPU off/baseline');
  process.stdout.write(
    `${table(header, rows, false)}\nstore ${storeOf(client).kind}, median of ${rounds} rotating rounds\n`,
  );
} finally {
  await bench.close();
}
