/**
 * `node --import tsx bench/events-client.ts --store URL [--rounds N] [--messages N]`
 *
 * Queue events as a client sees them, on any store: the wall time of enqueues (64 in flight) and of a
 * lifecycle (a worker with concurrency 64 and a no-op handler draining what a producer enqueues in
 * batches of 1000), on a queue with events off and one with them on, the two taking turns 2000 messages
 * at a time on fresh queues. Prints the medians and the ratio on / off (the target: at most 1.15).
 */
import { parseArgs } from 'node:util';
import { connect } from '../src/index.js';
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
const tag = Date.now().toString(36);

type Variant = 'off' | 'on';
type Phase = 'enqueue' | 'lifecycle';
const CHUNK = 2000;

/** ms for a chunk of a phase on a queue: CHUNK enqueues, or CHUNK messages' lifecycle. */
async function chunk(phase: Phase, queue: string): Promise<number> {
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
async function round(r: number): Promise<Record<Variant, Record<Phase, number>>> {
  const took: Record<Variant, Record<Phase, number>> = {
    off: { enqueue: 0, lifecycle: 0 },
    on: { enqueue: 0, lifecycle: 0 },
  };
  const queue = (variant: Variant, phase: Phase): string => `bench-events-${tag}-${variant}-${phase}-${r}`;
  for (const variant of ['off', 'on'] as const) {
    for (const phase of ['enqueue', 'lifecycle'] as const) {
      await client.configure(queue(variant, phase), { events: variant === 'on' });
    }
  }
  for (const phase of ['enqueue', 'lifecycle'] as const) {
    for (let c = 0; c * CHUNK < n; c++) {
      for (const variant of c % 2 === 0 ? (['off', 'on'] as const) : (['on', 'off'] as const)) {
        took[variant][phase] += await chunk(phase, queue(variant, phase));
      }
    }
  }
  for (const variant of ['off', 'on'] as const) {
    await client.clear(queue(variant, 'enqueue'), queue(variant, 'lifecycle'));
  }
  return took;
}

const figures: Record<Variant, Record<Phase, number>[]> = { off: [], on: [] };
try {
  await round(-1);
  for (let r = 0; r < rounds; r++) {
    const took = await round(r);
    for (const variant of ['off', 'on'] as const) figures[variant].push(took[variant]);
    process.stderr.write(`round ${r + 1}/${rounds}\n`);
  }
} finally {
  await client.close();
}

const rateOf = (variant: Variant, phase: Phase): number => n / (median(figures[variant].map((f) => f[phase])) / 1000);
console.log(
  `${client.store.kind}: median of ${rounds} rounds of ${n} messages, events off and on taking turns ${CHUNK} at a time`,
);
console.log('| measurement | events off | events on | time on / off |');
console.log('| --- | --- | --- | --- |');
for (const [phase, label] of [
  ['enqueue', 'enqueue, 64 in flight'],
  ['lifecycle', 'lifecycle, concurrency 64'],
] as const) {
  const [off, on] = [rateOf('off', phase), rateOf('on', phase)];
  console.log(`| ${label} | ${Math.round(off)} msgs/s | ${Math.round(on)} msgs/s | ${(off / on).toFixed(3)} |`);
}
