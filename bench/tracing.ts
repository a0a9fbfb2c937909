/**
 * `node --import tsx bench/tracing.ts [--rounds N] [--n N]`
 *
 * What the tracing hooks add per message, in nanoseconds of CPU, beside the same send and handler called
 * directly: first with `@opentelemetry/api` alone (no SDK, as most apps run kvmq), then with an SDK
 * registered whose spans are recorded and dropped (no exporter's cost). Rounds alternate the variants so
 * a busy machine weighs on each alike; the median round counts.
 */
import { parseArgs } from 'node:util';
import { NoopSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { traceProcess, UNTRACED } from '../src/tracing/process.js';
import { traceSend } from '../src/tracing/send.js';
import type { ClaimedMessage, NewMessage } from '../src/stores/contract/contract.js';
import type { AttemptFinish } from '../src/stores/contract/contract.js';
import type { Job } from '../src/model/types.js';
import { plainMessage } from '../src/stores/contract/new-message.js';

const { values } = parseArgs({ options: { rounds: { type: 'string' }, n: { type: 'string' } } });
const ROUNDS = Number(values.rounds ?? 9);
const N = Number(values.n ?? 100_000);

const queue = 'bench-tracing';
const message: NewMessage = plainMessage('m-1', new Uint8Array(8), { metadata: { user: 'x' } });
const messages = [message];
const claimed: ClaimedMessage = { ...message, attempt: 1, lockLeftMs: 30_000 };
const job = { queue, id: message.id, payload: null, metadata: message.metadata, filters: {}, attempt: 1 } as Job;
const finish: AttemptFinish = { id: message.id, attempt: 1, outcome: 'success', backoffMs: 0, error: null };
const held = { takenAway: false, abortReason: null };
const stored = Promise.resolve([]);
let sink = 0;
const send = (carrying: readonly NewMessage[]): Promise<never[]> => {
  sink += carrying.length;
  return stored;
};
const handler = (j: Job): undefined => {
  sink += j.attempt;
  return undefined;
};

type Variant = readonly [name: string, run: () => void];

const VARIANTS: readonly Variant[] = [
  ['send, direct', () => void send(messages)],
  ['send, traced', () => void traceSend(queue, messages, false, send)],
  [
    'handling, direct',
    () => {
      const t = UNTRACED;
      void t.run(handler, job);
      t.end(held);
    },
  ],
  [
    'handling, traced',
    () => {
      const t = traceProcess(queue, 'bench', claimed);
      void t.run(handler, job);
      t.outcome(finish, 'handler');
      t.end(held);
    },
  ],
];

/** Nanoseconds per call of each variant: the median of ROUNDS alternating rounds of N calls. */
async function measure(): Promise<Map<string, number>> {
  const perRound = new Map<string, number[]>(VARIANTS.map(([name]) => [name, []]));
  for (let round = 0; round <= ROUNDS; round++) {
    for (const [name, run] of VARIANTS) {
      const start = process.hrtime.bigint();
      for (let i = 0; i < N; i++) run();
      // What the calls queued (span ends after the send settles) belongs to their cost.
      await new Promise((resolve) => setImmediate(resolve));
      const ns = Number(process.hrtime.bigint() - start) / N;
      if (round > 0) perRound.get(name)?.push(ns); // round 0 warms the JIT
    }
  }
  return new Map([...perRound].map(([name, ns]) => [name, median(ns)]));
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
}

function report(title: string, ns: Map<string, number>): void {
  console.log(`\n${title}`);
  for (const [name] of VARIANTS) console.log(`  ${name.padEnd(18)} ${(ns.get(name) ?? NaN).toFixed(0).padStart(7)} ns`);
  const extra = (what: string): string =>
    ((ns.get(`${what}, traced`) ?? NaN) - (ns.get(`${what}, direct`) ?? NaN)).toFixed(0);
  console.log(`  added per enqueue call: ${extra('send')} ns; per handling: ${extra('handling')} ns`);
}

console.log(`tracing hooks: ${ROUNDS} rounds of ${N} calls each, median round`);
report('@opentelemetry/api only (no SDK)', await measure());
const provider = new NodeTracerProvider({ spanProcessors: [new NoopSpanProcessor()] });
provider.register();
report('SDK registered (spans recorded, then dropped)', await measure());
await provider.shutdown();
if (sink < 0) console.log(sink);
