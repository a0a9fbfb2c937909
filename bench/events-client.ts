/**
 * `node --import tsx bench/events-client.ts --store URL [--rounds N] [--messages N]`
 *
 * Queue events as a client sees them, on any store: the wall time of enqueues (64 in flight) and of a
 * lifecycle (a worker with concurrency 64 and a no-op handler draining what a producer enqueues in
 * batches of 1000), on a queue with events off and one with them on, the two taking turns 2000 messages
 * at a time on fresh queues. Prints the medians and the ratio on / off (the target: at most 1.15).
 * On a single Redis it also reads the server's main-thread CPU time (INFO cpu) around each chunk: wall time
 * on a loaded machine swings more than what events cost.
 */
import { parseArgs } from 'node:util';
import { connect } from '../src/index.js';
import { openConnection } from '../src/redis/connection.js';
import { parseRedisUrl } from '../src/redis/url.js';
import { fill, inFlight, median, signal, timed } from './common.js';

const { values } = parseArgs({
  options: {
    store: { type: 'string' },
    rounds: { type: 'string', default: '5' },
    messages: { type: 'string', default: '20000' },
  },
});
const rounds = Number(values.rounds);
const n = Number(values.messages);
const client = await connect(values.store, { maintenance: false });
const redisUrl = client.store.kind === 'redis' ? parseRedisUrl(values.store ?? '') : null;
const redis = redisUrl === null || redisUrl.cluster ? null : await openConnection(redisUrl, 'kvmq-bench');

/** The Redis main thread's CPU time so far, µs (0 on other stores). */
async function serverCpu(): Promise<number> {
  if (redis === null) return 0;
  const cpu = await redis.info('cpu');
  const seconds = (name: string): number => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(cpu)?.[1] ?? NaN);
  return 1e6 * (seconds('used_cpu_user_main_thread') + seconds('used_cpu_sys_main_thread'));
}
const tag = Date.now().toString(36);

type Variant = 'off' | 'on';
type Phase = 'enqueue' | 'lifecycle';
type Measure = 'wall' | 'cpu';
const CHUNK = 2000;

/** ms of wall time and µs of Redis CPU for a chunk of a phase on a queue. */
async function chunk(phase: Phase, queue: string): Promise<Record<Measure, number>> {
  const cpu = await serverCpu();
  const wall = await chunkWall(phase, queue);
  return { wall, cpu: (await serverCpu()) - cpu };
}

/** ms for a chunk of a phase on a queue: CHUNK enqueues, or CHUNK messages' lifecycle. */
async function chunkWall(phase: Phase, queue: string): Promise<number> {
  if (phase === 'enqueue') return timed(() => inFlight(CHUNK, 64, (i) => client.enqueue(queue, { i })));
  let handled = 0;
  const allHandled = signal();
  return timed(async () => {
    const worker = client.worker(
      queue,
      () => {
        if (++handled === CHUNK) allHandled.fire();
      },
      { concurrency: 64 },
    );
    await fill(client, queue, CHUNK, 1000);
    await allHandled.promise;
    await worker.stop();
  });
}

/**
 * One round: fresh queues, and each phase a chunk at a time, off then on then on then off..., so the
 * load of a shared machine falls on both alike. Returns the ms each variant took per phase.
 */
async function round(r: number): Promise<Record<Variant, Record<Measure, Record<Phase, number>>>> {
  const zero = (): Record<Measure, Record<Phase, number>> => ({
    wall: { enqueue: 0, lifecycle: 0 },
    cpu: { enqueue: 0, lifecycle: 0 },
  });
  const took = { off: zero(), on: zero() };
  const queue = (variant: Variant, phase: Phase): string => `bench-events-${tag}-${variant}-${phase}-${r}`;
  for (const variant of ['off', 'on'] as const) {
    for (const phase of ['enqueue', 'lifecycle'] as const) {
      await client.configure(queue(variant, phase), { events: variant === 'on' });
    }
  }
  for (const phase of ['enqueue', 'lifecycle'] as const) {
    for (let c = 0; c * CHUNK < n; c++) {
      for (const variant of c % 2 === 0 ? (['off', 'on'] as const) : (['on', 'off'] as const)) {
        const spent = await chunk(phase, queue(variant, phase));
        took[variant].wall[phase] += spent.wall;
        took[variant].cpu[phase] += spent.cpu;
      }
    }
  }
  for (const variant of ['off', 'on'] as const) {
    await client.clear(queue(variant, 'enqueue'), queue(variant, 'lifecycle'));
  }
  return took;
}

const figures: Record<Variant, Record<Measure, Record<Phase, number>>[]> = { off: [], on: [] };
try {
  await round(-1);
  for (let r = 0; r < rounds; r++) {
    const took = await round(r);
    for (const variant of ['off', 'on'] as const) figures[variant].push(took[variant]);
    process.stderr.write(`round ${r + 1}/${rounds}\n`);
  }
} finally {
  await client.close();
  redis?.disconnect();
}

const med = (variant: Variant, measure: Measure, phase: Phase): number =>
  median(figures[variant].map((f) => f[measure][phase]));
console.log(
  `${client.store.kind}: median of ${rounds} rounds of ${n} messages, events off and on taking turns ${CHUNK} at a time`,
);
console.log('| measurement | events off | events on | on / off |');
console.log('| --- | --- | --- | --- |');
for (const [phase, label] of [
  ['enqueue', 'enqueue, 64 in flight'],
  ['lifecycle', 'lifecycle, concurrency 64'],
] as const) {
  const [off, on] = [med('off', 'wall', phase), med('on', 'wall', phase)];
  console.log(
    `| ${label} | ${Math.round(n / (off / 1000))} msgs/s | ${Math.round(n / (on / 1000))} msgs/s | ${(on / off).toFixed(3)} |`,
  );
  if (redis === null) continue;
  const [cpuOff, cpuOn] = [med('off', 'cpu', phase) / n, med('on', 'cpu', phase) / n];
  console.log(
    `| … Redis CPU per message | ${cpuOff.toFixed(2)} µs | ${cpuOn.toFixed(2)} µs | ${(cpuOn / cpuOff).toFixed(3)} |`,
  );
}
